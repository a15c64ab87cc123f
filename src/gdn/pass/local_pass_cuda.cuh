// The passes of LocalPass on the GPU: the launches of the phases' kernels (the chunk math
// of gdn/chunk run by CUDA blocks on CudaExec: <phase>/<phase>_cuda.cuh, and in the bf16
// mode the register kernels of <phase>/<phase>_bf16.h). Two kinds of kernel:
//  - chunk jobs, one block per (batch * value head, chunk): prepare, output_from_states and
//    the second halves of output and backward. Each block's scratch is its slice of the pass's
//    workspace (global memory: the chunk's backward needs about 9 C^2 + 9 C K + 4 C V elements).
//  - sequential walks over the chunks of one (batch, value head): transition, adjoint and
//    the first halves of output and backward. The state's columns never mix (chunk_kernel.h,
//    the *_cols forms), so each walk is split over column tiles of BV columns: one block per
//    (batch * value head, tile), B Hv ceil(V / BV) blocks (transition also tiles M's K
//    columns), each keeping its K x BV state tile and its two C x BV scratch tiles in
//    dynamic shared memory and reading only its columns of u and dO. BV is 64 where that
//    already gives every SM a block and 32 otherwise (walk_launch): at Qwen3-Next's
//    B Hv = 32, V = 128 that is 128 blocks on an H200's 132 SMs instead of 32. Narrower
//    tiles would fill more SMs at small B Hv, but every tile re-reads all of w, k~, q_g and P
//    of every chunk, so the factor traffic grows as V / BV.
// In the bf16 mode, at C = 64 and K = 64 or 128, the four walks run as register walks
// instead (gdn/pass/bf16_walk.h, gdn/pass/bf16_kernels_cuda.cu: the walked tile in mma accumulators
// across chunks, the factor tiles by cp.async), and prepare and the output pass's outputs
// as kernels with no global scratch (prepare_bf16.h, outputs_bf16.h), and the
// backward's chunk jobs as fla's split into two kernels that hand each other a third of a
// factor block per job through the workspace (backward_bf16.h); the kernels below take
// every other case.
// output is (a) the state walk alone (two GEMMs per chunk and tile), storing every chunk's
// entry state, then (b) every chunk's outputs from its entry state at once.
// backward is (a) the adjoint walk, storing every chunk's exit adjoint (PassArgs::adjoints)
// and dh0 where a sequence starts, then (b) one chunk job per (batch * value head, chunk):
// ChunkKernel::backward from the chunk's kept entry state and exit adjoint. The sequential
// part is then the adjoint step alone (4 GEMMs of C K BV per chunk and tile); the chunk's
// whole backward (about 30 GEMMs) runs on every chunk at once. The host keeps its fused
// walk.
//
// Memory at a 32K-token shard of Qwen3-Next's GDN (B = 1, Hv = 32, Hk = 16, K = V = 128,
// C = 64, fp32; 512 chunks per (batch, head), 16384 (b, h, chunk) jobs), per layer:
//   WY factors, 3 C K + C V + C^2 + 1, padded: 36868 per job       2.25 GiB (2.42 GB)
//   chunk entry states, K V = 16384 per job                        1.00 GiB (1.07 GB)
//   exit adjoints, K V per job (inside backward() only)            1.00 GiB
//   dq / dk per value head scratch, 2 x G B T Hk K (G = 2)         1.00 GiB
//   chunk-job workspace, min(jobs, 4 x 132 SMs) = 528 blocks
//     x 230209 elements (the chunk's backward scratch and rows)    0.45 GiB
// Kept from a layer's forward to its backward: the entry states only (1 GiB; the CP core
// frees the factors after the forward, and with recomputation they are all it keeps).
// Peak inside a layer's backward: factors (its phase 1 makes them again) + states + exit
// adjoints + dq / dk scratch + workspace = 5.7 GiB, released or reused by the next layer.
// Every buffer is a Buffer<Cuda> from the device's pool (runtime/device_pool.h), the exit
// adjoints included: once the pool is warm (from the second step) nothing here calls
// cudaMalloc or cudaFree; the walks' tiles live in shared memory.
//
// This header holds the passes as templates (the kernels in the phase files it includes);
// local_pass_cuda.cu instantiates them for float (and defines the non-template functions),
// local_pass_cuda_f64.cu for double: two translation units that nvcc compiles side by side
// (the whole file took 205 s of one core for sm_90, the build's longest by 27x).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/autocast.h"
#include "core/error.h"
#include "gdn/adjoint_walk/adjoint_walk_cuda.cuh"
#include "gdn/backward/backward_cuda.cuh"
#include "gdn/outputs/outputs_cuda.cuh"
#include "gdn/pass/bf16_kernels_cuda.h"
#include "gdn/pass/block_buffers.cuh"
#include "gdn/pass/launch_counts.h"
#include "gdn/prepare/prepare_cuda.cuh"
#include "gdn/state_walk/state_walk_cuda.cuh"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn::pass {

namespace {

int grid_for(std::int64_t n, int threads) {
  return int(std::min<std::int64_t>((n + threads - 1) / threads, 65535));
}

int sm_count() {
  int device = 0, sms = 0;
  GDN_CUDA_CHECK(cudaGetDevice(&device));
  GDN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return std::max(1, sms);
}

// A few resident blocks per SM; more only multiplies the workspace.
int max_blocks() {
  return 4 * sm_count();
}

int blocks_for(std::int64_t jobs) {
  return int(std::max<std::int64_t>(1, std::min<std::int64_t>(jobs, max_blocks())));
}

// A walk kernel's launch: its column tile width BV and dynamic shared memory.
struct WalkLaunch {
  int bv;
  std::size_t smem;
};

// BV = 64 where B Hv ceil(V / 64) blocks already fill the SMs, else 32 (see the top of this
// file); then halved until the tiles fit the block's shared memory next to the kernel's
// static share (the GEMM's staging), which only large K or C in fp64 need.
template <typename T>
int walk_width(const PassArgs<T>& a) {
  return walk::walk_width_for(std::int64_t(a.B) * a.Hv, a.V, sm_count());
}

template <typename T, typename Kernel>
WalkLaunch walk_launch(const PassArgs<T>& a, Kernel kernel) {
  int bv = std::max(1, std::min(walk_width(a), std::max(a.K, a.V)));
  int device = 0, optin = 0;
  GDN_CUDA_CHECK(cudaGetDevice(&device));
  GDN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attr{};
  GDN_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  const std::size_t room = std::size_t(optin) - std::min<std::size_t>(optin, attr.sharedSizeBytes);
  while (bv > 1 && walk::tile_elems(a.K, a.C, bv) * sizeof(T) > room) bv /= 2;
  const std::size_t smem = walk::tile_elems(a.K, a.C, bv) * sizeof(T);
  GDN_CHECK(smem <= room, "GDN CUDA pass: a K = ", a.K, ", C = ", a.C,
            " state column does not fit in shared memory (", room, " bytes)");
  // Above the default 48 KiB a kernel must opt in; setting it every launch is cheap.
  GDN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  return {bv, smem};
}

// One block per (b, h, tile) job: the walks are few and long, so every one gets its block.
int walk_grid(std::int64_t jobs) {
  return int(std::max<std::int64_t>(1, std::min<std::int64_t>(jobs, 1 << 30)));
}

// The launch's view of the arguments: LocalPass's, plus the GEMM choice of the calling
// thread: bf16 tensor cores inside a bf16 autocast scope (the model's bf16 mode and the
// op's, gdn/bf16_op.h), TF32 where asked, fp32 otherwise; fp64 always exact.
template <typename T>
PassArgs<T> configured(const PassArgs<T>& args) {
  PassArgs<T> a = args;
  if constexpr (std::is_same_v<T, float>)
    a.gemm = bf16_autocast() ? ChunkGemm::kBf16 : cuda_tf32() ? ChunkGemm::kTf32 : ChunkGemm::kFp32;
  return a;
}

}  // namespace

template <typename T>
std::size_t workspace_elems(Cuda, const PassArgs<T>& a) {
  // The chunk jobs (prepare, output_from_states, backward part (b)) have the most jobs, so
  // they launch the most blocks; the walks keep their tiles in shared memory.
  return std::size_t(
             blocks_for(std::int64_t(a.B) * a.Hv * std::max<std::int64_t>(1, a.num_chunks))) *
         BlockBuffers<T>::size(a.C, a.K, a.V);
}

template <typename T>
bool bf16_factors(Cuda, const PassArgs<T>& a) {
  if constexpr (std::is_same_v<T, float>)
    return register_factors(configured(a));
  else
    return false;
}

template <typename T>
void prepare(Cuda, const PassArgs<T>& args) {
  const PassArgs<T> a = configured(args);
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (register_prepare(a)) return count_launch("prepare", KernelPath::bf16_register);
  count_launch("prepare", KernelPath::tiled);
  prepare_kernel<T><<<blocks_for(jobs), kThreads>>>(a);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void transition(Cuda, const PassArgs<T>& args, T* M, T* U) {
  const PassArgs<T> a = configured(args);
  if (a.B * a.Hv == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (register_transition(a, M, U, walk_width(a)))
      return count_launch("transition", KernelPath::bf16_register);
  count_launch("transition", KernelPath::tiled);
  const WalkLaunch l = walk_launch(a, transition_kernel<T>);
  const std::int64_t tiles = (a.K + l.bv - 1) / l.bv + (a.V + l.bv - 1) / l.bv;
  transition_kernel<T><<<walk_grid(a.B * a.Hv * tiles), kThreads, l.smem>>>(a, M, U, l.bv);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void output(Cuda, const PassArgs<T>& args, const T* h_in, T* o, T* ht) {
  const PassArgs<T> a = configured(args);
  if (a.B * a.Hv == 0) return;
  bool walked = false;
  if constexpr (std::is_same_v<T, float>) walked = register_state_walk(a, h_in, ht, walk_width(a));
  count_launch("state_walk", walked ? KernelPath::bf16_register : KernelPath::tiled);
  if (!walked) {
    const WalkLaunch l = walk_launch(a, state_walk_kernel<T>);
    const std::int64_t tiles = (a.V + l.bv - 1) / l.bv;
    state_walk_kernel<T><<<walk_grid(a.B * a.Hv * tiles), kThreads, l.smem>>>(a, h_in, ht, l.bv);
    GDN_CUDA_CHECK(cudaGetLastError());
  }
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (register_outputs(a, o)) return count_launch("outputs", KernelPath::bf16_register);
  count_launch("outputs", KernelPath::tiled);
  outputs_kernel<T><<<blocks_for(jobs), kThreads>>>(a, o);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void output_from_states(Cuda, const PassArgs<T>& args, T* o, T* ht) {
  const PassArgs<T> a = configured(args);
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  // The bf16 mode keeps the entry states rounded to bf16 (walk::store_kept), from which the
  // last chunk's step would not give the first forward's ht bits.
  GDN_CHECK(!(ht && a.gemm == ChunkGemm::kBf16),
            "LocalPass::output_from_states: ht is not recomputed in the bf16 mode on CUDA (the "
            "kept entry states are rounded to bf16); take it from the first forward");
  if constexpr (std::is_same_v<T, float>)
    if (register_outputs(a, o)) return count_launch("outputs", KernelPath::bf16_register);
  count_launch("output_from_states", KernelPath::tiled);
  output_from_states_kernel<T><<<blocks_for(jobs), kThreads>>>(a, o, ht);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void adjoint(Cuda, const PassArgs<T>& args, const T* dO, const T* dht, T* D) {
  const PassArgs<T> a = configured(args);
  if (a.B * a.Hv == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (register_adjoint(a, dO, dht, D, walk_width(a)))
      return count_launch("adjoint", KernelPath::bf16_register);
  count_launch("adjoint", KernelPath::tiled);
  const WalkLaunch l = walk_launch(a, adjoint_kernel<T>);
  const std::int64_t tiles = (a.V + l.bv - 1) / l.bv;
  adjoint_kernel<T><<<walk_grid(a.B * a.Hv * tiles), kThreads, l.smem>>>(a, dO, dht, D, l.bv);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void backward(Cuda, const PassArgs<T>& args, const T* lambda, const T* dO, const T* dht,
              GdnGradView<T>& gr, T* dqv, T* dkv) {
  const PassArgs<T> a = configured(args);
  GDN_CHECK(a.adjoints != nullptr || a.num_chunks == 0,
            "GDN CUDA backward: no exit-adjoint buffer (LocalPass::backward allocates it)");
  GDN_CHECK(a.prepared || a.num_chunks == 0, "GDN CUDA backward: the WY factors are not made");
  if (a.B * a.Hv == 0) return;
  // (a) the sequential adjoint walk, V-tiled: exit adjoints and dh0.
  bool walked = false;
  if constexpr (std::is_same_v<T, float>)
    walked = register_backward_walk(a, lambda, dO, dht, gr.dh0, walk_width(a));
  count_launch("backward_walk", walked ? KernelPath::bf16_register : KernelPath::tiled);
  if (!walked) {
    const WalkLaunch l = walk_launch(a, backward_walk_kernel<T>);
    const std::int64_t tiles = (a.V + l.bv - 1) / l.bv;
    backward_walk_kernel<T>
        <<<walk_grid(a.B * a.Hv * tiles), kThreads, l.smem>>>(a, lambda, dO, dht, gr.dh0, l.bv);
    GDN_CUDA_CHECK(cudaGetLastError());
  }
  // (b) every chunk's backward at once.
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  bool split = false;
  if constexpr (std::is_same_v<T, float>) split = register_backward_chunks(a, dO, gr, dqv, dkv);
  count_launch("backward_chunks", split ? KernelPath::bf16_register : KernelPath::tiled);
  if (!split) {
    backward_chunks_kernel<T><<<blocks_for(jobs), kThreads>>>(a, dO, gr, dqv, dkv);
    GDN_CUDA_CHECK(cudaGetLastError());
  }
  const std::int64_t qk_elems = std::int64_t(a.B) * a.Tl * a.Hk * a.K;
  if (qk_elems == 0) return;
  if (a.io.l2norm) {  // the bf16 op normalised q and k inside: their backward here too
    const std::int64_t rows = qk_elems / a.K;
    sum_head_groups_l2norm_kernel<T>
        <<<grid_for(rows, 256), 256>>>(dqv, rows, a.K, a.G, a.io.q, gr.dq);
    GDN_CUDA_CHECK(cudaGetLastError());
    sum_head_groups_l2norm_kernel<T>
        <<<grid_for(rows, 256), 256>>>(dkv, rows, a.K, a.G, a.io.k, gr.dk);
    GDN_CUDA_CHECK(cudaGetLastError());
    return;
  }
  sum_head_groups_kernel<T><<<grid_for(qk_elems, 256), 256>>>(dqv, qk_elems, a.G, gr.dq);
  GDN_CUDA_CHECK(cudaGetLastError());
  sum_head_groups_kernel<T><<<grid_for(qk_elems, 256), 256>>>(dkv, qk_elems, a.G, gr.dk);
  GDN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gdn::pass

// The passes for one element type T; local_pass_cuda.cu and local_pass_cuda_f64.cu each
// expand it once.
#define GDN_LOCAL_PASS_CUDA_INSTANTIATE(T)                                                        \
  namespace gdn::pass {                                                                           \
  template std::size_t workspace_elems(Cuda, const PassArgs<T>&);                                 \
  template bool bf16_factors(Cuda, const PassArgs<T>&);                                           \
  template void prepare(Cuda, const PassArgs<T>&);                                                \
  template void transition(Cuda, const PassArgs<T>&, T*, T*);                                     \
  template void output(Cuda, const PassArgs<T>&, const T*, T*, T*);                               \
  template void output_from_states(Cuda, const PassArgs<T>&, T*, T*);                             \
  template void adjoint(Cuda, const PassArgs<T>&, const T*, const T*, T*);                        \
  template void backward(Cuda, const PassArgs<T>&, const T*, const T*, const T*, GdnGradView<T>&, \
                         T*, T*);                                                                 \
  }
