// The passes of LocalPass on the GPU, as sequences of the phases' launches (each phase's
// kernels and launcher in gdn/<phase>/<phase>_cuda.cu: the chunk math of gdn/chunk run by
// CUDA blocks on CudaExec, and in the bf16 mode the register kernels of
// <phase>/<phase>_bf16.h), as fla's chunk.py sequences its kernels. Two kinds of kernel:
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
// instead (gdn/chunk/bf16_walk.h, gdn/chunk/bf16_launch.cuh: the walked tile in mma accumulators
// across chunks, the factor tiles by cp.async), and prepare and the output pass's outputs
// as kernels with no global scratch (prepare_bf16.h, outputs_bf16.h), and the
// backward's chunk jobs as fla's split into two kernels that hand each other a third of a
// factor block per job through the workspace (backward_bf16.h); the CudaExec kernels take
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

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "gdn/adjoint_walk/adjoint_walk_bf16.h"
#include "gdn/adjoint_walk/adjoint_walk_cuda.h"
#include "gdn/backward/backward_bf16.h"
#include "gdn/backward/backward_cuda.h"
#include "gdn/chunk/bf16_launch.cuh"
#include "gdn/chunk/cuda_launch.cuh"
#include "gdn/outputs/outputs_bf16.h"
#include "gdn/outputs/outputs_cuda.h"
#include "gdn/pass/device_passes.h"
#include "gdn/prepare/prepare_bf16.h"
#include "gdn/prepare/prepare_cuda.h"
#include "gdn/state_walk/state_walk_bf16.h"
#include "gdn/state_walk/state_walk_cuda.h"

namespace gdn::pass {

namespace {

// The most shared memory any register kernel takes at this K and V (walks at width 64).
std::size_t largest_smem(int K, int V) {
  return std::max({rwalk::PrepareLayout{K, V}.bytes(), rwalk::StateLayout{K, 64}.bytes(),
                   rwalk::AdjointLayout{K, 64}.bytes(), rwalk::OutputLayout{K, 64}.bytes(),
                   rwalk::ProductsLayout{K, V}.bytes(), rwalk::WyLayout{K, V}.bytes()});
}

// Whether every register kernel runs at a's shape, on this device, in a's mode; where not
// in the bf16 mode, notes why for the phase "prepare".
bool register_factors(const PassArgs<float>& a) {
  if (a.gemm != ChunkGemm::kBf16) return false;  // every fp32 pass: no reason to record
  RegisterConditions c = conditions(a, 0, nullptr, largest_smem(a.K, a.V));
  c.factors_aligned = true;  // the device pool's blocks, and Bf16Factors' size is 4 k floats
  const std::string why = register_fallback_reason(c);
  if (why.empty()) return true;
  note_fallback("prepare", why);
  return false;
}

}  // namespace

bool needs_prepare(Cuda) {
  return true;
}

bool chunk_parallel_backward(Cuda) {
  return true;
}

int grad_scratch_heads(Cuda, int G) {
  return G;
}

template <typename T>
std::size_t workspace_elems(Cuda, const PassArgs<T>& a) {
  return chunk_job_workspace_elems(a);
}

template <typename T>
bool bf16_factors(Cuda, const PassArgs<T>& a) {
  if constexpr (std::is_same_v<T, float>)
    return register_factors(a);
  else
    return false;
}

template <typename T>
void prepare(Cuda, const PassArgs<T>& args) {
  launch_prepare(args);
}

template <typename T>
void transition(Cuda, const PassArgs<T>& args, T* M, T* U) {
  launch_transition(args, M, U);
}

template <typename T>
void output(Cuda, const PassArgs<T>& args, const T* h_in, T* o, T* ht) {
  const PassArgs<T> a = args;
  if (a.B * a.Hv == 0) return;
  launch_state_walk(a, h_in, ht);  // (a) every chunk's entry state
  launch_outputs(a, o);            // (b) every chunk's outputs at once
}

template <typename T>
void output_from_states(Cuda, const PassArgs<T>& args, T* o, T* ht) {
  launch_output_from_states(args, o, ht);
}

template <typename T>
void adjoint(Cuda, const PassArgs<T>& args, const T* dO, const T* dht, T* D) {
  launch_adjoint(args, dO, dht, D);
}

template <typename T>
void backward(Cuda, const PassArgs<T>& args, const T* lambda, const T* dO, const T* dht,
              GdnGradView<T>& gr, T* dqv, T* dkv) {
  const PassArgs<T> a = args;
  GDN_CHECK(a.adjoints != nullptr || a.num_chunks == 0,
            "GDN CUDA backward: no exit-adjoint buffer (LocalPass::backward allocates it)");
  GDN_CHECK(a.prepared || a.num_chunks == 0, "GDN CUDA backward: the WY factors are not made");
  if (a.B * a.Hv == 0) return;
  launch_backward_walk(a, lambda, dO, dht, gr.dh0);  // (a) exit adjoints and dh0
  launch_backward_chunks(a, dO, gr, dqv, dkv);       // (b) every chunk's backward at once
}

template std::size_t workspace_elems(Cuda, const PassArgs<float>&);
template std::size_t workspace_elems(Cuda, const PassArgs<double>&);
template bool bf16_factors(Cuda, const PassArgs<float>&);
template bool bf16_factors(Cuda, const PassArgs<double>&);
template void prepare(Cuda, const PassArgs<float>&);
template void prepare(Cuda, const PassArgs<double>&);
template void transition(Cuda, const PassArgs<float>&, float*, float*);
template void transition(Cuda, const PassArgs<double>&, double*, double*);
template void output(Cuda, const PassArgs<float>&, const float*, float*, float*);
template void output(Cuda, const PassArgs<double>&, const double*, double*, double*);
template void output_from_states(Cuda, const PassArgs<float>&, float*, float*);
template void output_from_states(Cuda, const PassArgs<double>&, double*, double*);
template void adjoint(Cuda, const PassArgs<float>&, const float*, const float*, float*);
template void adjoint(Cuda, const PassArgs<double>&, const double*, const double*, double*);
template void backward(Cuda, const PassArgs<float>&, const float*, const float*, const float*,
                       GdnGradView<float>&, float*, float*);
template void backward(Cuda, const PassArgs<double>&, const double*, const double*, const double*,
                       GdnGradView<double>&, double*, double*);

}  // namespace gdn::pass
