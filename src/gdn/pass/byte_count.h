// The bytes each kernel of the bf16 op on CUDA (ChunkedGdnBf16<Cuda>: forward, then
// backward, on the register kernels, straight from the bf16 tensors) reads and writes in
// global memory, counted from the kernels' code: what DRAM must carry if every kernel found each
// byte it touches once (its re-reads in L2). `reread` is what the kernel asks for beyond that: the
// walks' column tiles each read the chunk's whole factor tiles. The measured side is ncu's DRAM
// bytes (scripts/ncu_bytes.py); docs/gpu.md tables both. h0, ht, dht and dh0 (B Hv K V floats each)
// are left out: the benchmarks pass none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gdn/chunk/bf16_factors.h"
#include "gdn/chunk/walk_tiles.h"
#include "gdn/problem.h"

namespace gdn {

struct KernelBytes {
  std::string kernel;  // "forward: prepare", ...
  double read, written, reread;
};

// sms: the GPU's multiprocessors, which set the walks' column width (gdn/chunk/cuda_launch.cuh).
inline std::vector<KernelBytes> bf16_op_bytes(const GdnProblem& p, int sms) {
  const double C = p.chunk_size, K = p.K, V = p.V, G = p.group();
  const double chunks = double(p.B) * p.Hv * double((p.T + p.chunk_size - 1) / p.chunk_size);
  const double tokens = double(p.B) * p.T;
  const double n_qk = tokens * p.Hk * K, n_v = tokens * p.Hv * V, n_g = tokens * p.Hv;
  const double f32 = 4, b16 = 2;
  const double states = chunks * K * V * b16;  // entry states, exit adjoints (kept in bf16)
  const double factors = chunks * double(Bf16Factors{p.chunk_size, p.K, p.V}.floats()) * f32;
  const double w = chunks * C * K * b16, P = chunks * C * C * b16, u = chunks * C * V * b16;
  const double gamma = chunks * f32;
  const double handoff_f32 = chunks * (C * C + 4) * f32, handoff_b16 = chunks * C * (V + K) * b16;
  // The walks' column tiles and the outputs'.
  const double walk_tiles = V / walk::walk_width_for(std::int64_t(p.B) * p.Hv, p.V, sms);
  const double out_tiles = V / walk::output_width(p.V);
  const double norm = p.l2norm_qk ? 1 : 0;

  // The register kernels read q, k, v, beta and dO and write o in bf16 (PassArgs::io); g
  // is fp32. prepare and part 2 read the key head's q and k once per value head of its group
  // (and once more for the norms).
  const double qkv = b16 * (2 * n_qk + n_v) + (b16 + f32) * n_g;
  const double qk_again = b16 * 2 * n_qk * (G * (1 + norm) - 1);
  std::vector<KernelBytes> k;
  k.push_back({"forward: prepare", qkv, factors, qk_again});
  k.push_back({"forward: state_walk", 2 * w + u + gamma, states, 2 * w * (walk_tiles - 1)});
  k.push_back(
      {"forward: outputs", 2 * w + P + u + states, b16 * n_v, (2 * w + P) * (out_tiles - 1)});
  k.push_back({"backward: prepare", qkv, factors, qk_again});
  k.push_back({"backward: backward_walk", 3 * w + P + gamma + b16 * n_v, states,
               (3 * w + P) * (walk_tiles - 1)});
  // Part 1: h, dh, w, k~, P, dO, u; X and dk~ per value head, the handoff.
  k.push_back({"backward: backward_products", 2 * states + 2 * w + P + b16 * n_v + u,
               2 * f32 * G * n_qk + handoff_f32 + handoff_b16, 0});
  // Part 2: q, k, v, g, beta, the handoff, X and dk~ (overwritten by dq, dk), u, w and T
  // (prepare's inverse, C x C in bf16 like P).
  k.push_back({"backward: backward_wy",
               qkv + handoff_f32 + handoff_b16 + 2 * f32 * G * n_qk + u + w + P,
               2 * f32 * G * n_qk + f32 * (n_v + 2 * n_g), qk_again});
  // dq and dk summed over each key head's value heads, and the norm's backward in the same
  // kernel (it reads the bf16 q and k).
  k.push_back({norm ? "backward: sum dq, dk over value heads, l2norm"
                    : "backward: sum dq, dk over value heads",
               2 * f32 * G * n_qk + norm * b16 * 2 * n_qk, 2 * f32 * n_qk, 0});
  return k;
}

}  // namespace gdn
