// The passes of LocalPass on the GPU: the chunk math of ops/gdn_chunk run by CUDA blocks
// (CudaExec). Two kinds of kernel:
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
// instead (gdn/register_walk.h, register_walk_cuda.cu: the walked tile in mma accumulators
// across chunks, the factor tiles by cp.async), and prepare and the output pass's outputs
// as kernels with no global scratch (register_prepare.h, register_outputs.h), and the
// backward's chunk jobs as fla's split into two kernels that hand each other a third of a
// factor block per job through the workspace (register_backward.h); the kernels below take
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
// This header holds the kernels and the passes as templates; local_pass_cuda.cu
// instantiates them for float (and defines the non-template functions),
// local_pass_cuda_f64.cu for double: two translation units that nvcc compiles side by side
// (the whole file took 205 s of one core for sm_90, the build's longest by 27x).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/autocast.h"
#include "core/error.h"
#include "gdn/pass_args.h"
#include "gdn/pass_walks.h"
#include "gdn/register_walk_cuda.h"
#include "ops/gdn_chunk/chunk_kernel.h"
#include "ops/gdn_chunk/cuda_exec.cuh"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn::pass {

namespace {

using Segment = SliceLayout::Segment;
using Chunk = SliceLayout::Chunk;
// Threads per block of every pass kernel: the tiled GEMM's 16 x 16 thread grid.
constexpr int kThreads = kTileThreads;

// One block's slice of the workspace: the kernel's scratch, then the chunk's rows.
template <typename T>
struct BlockBuffers {
  T *kernel, *q, *k, *v, *g, *beta, *dO, *o, *dq, *dk, *dv, *dg, *dbeta, *h;

  __host__ __device__ static std::size_t size(int C, int K, int V) {
    const std::size_t CK = std::size_t(C) * K, CV = std::size_t(C) * V;
    return ChunkKernel<T, CudaExec>::workspace_size(C, K, V) + 4 * CK + 4 * CV +
           4 * std::size_t(C) + std::size_t(K) * V;
  }
  __device__ BlockBuffers(const PassArgs<T>& a) {
    const std::size_t CK = std::size_t(a.C) * a.K, CV = std::size_t(a.C) * a.V;
    T* p = a.workspace + blockIdx.x * size(a.C, a.K, a.V);
    auto take = [&p](std::size_t n) {
      T* r = p;
      p += n;
      return r;
    };
    kernel = take(ChunkKernel<T, CudaExec>::workspace_size(a.C, a.K, a.V));
    q = take(CK), k = take(CK), dq = take(CK), dk = take(CK);
    v = take(CV), dO = take(CV), o = take(CV), dv = take(CV);
    g = take(a.C), beta = take(a.C), dg = take(a.C), dbeta = take(a.C);
    h = take(std::size_t(a.K) * a.V);
  }
  __device__ ChunkRows<T> rows() const { return {q, k, v, g, beta}; }
  __device__ ChunkRowGrads<T> grads() const { return {dq, dk, dv, dg, dbeta}; }
};

// Block-cooperative copies. Each leaves the barrier to the caller's next sync point
// (a ChunkKernel call begins with one) unless noted.
template <typename T>
__device__ void block_fill(T* dst, std::int64_t n, T value) {
  for (std::int64_t x = threadIdx.x; x < n; x += blockDim.x) dst[x] = value;
}
template <typename T>
__device__ void block_copy(T* dst, const T* src, std::int64_t n) {
  for (std::int64_t x = threadIdx.x; x < n; x += blockDim.x) dst[x] = src[x];
}
// n rows of `width` elements, `stride` apart, into a dense C-row block, zero past n.
template <typename T>
__device__ void gather(const T* src, std::int64_t stride, int n, int width, int C, T* dst) {
  for (int x = threadIdx.x; x < C * width; x += blockDim.x) {
    const int i = x / width, d = x % width;
    dst[x] = i < n ? src[i * stride + d] : T(0);
  }
}
template <typename T>
__device__ void scatter(const T* src, int n, int width, T* dst, std::int64_t stride) {
  for (int x = threadIdx.x; x < n * width; x += blockDim.x) {
    const int i = x / width, d = x % width;
    dst[i * stride + d] = src[x];
  }
}

// chunk c of (batch, value head) bh into the block's row buffers (local_pass_host.cpp's
// gather_rows).
template <typename T>
__device__ void gather_rows(const PassArgs<T>& a, int bh, std::int64_t c,
                            const BlockBuffers<T>& buf) {
  const int b = bh / a.Hv, hv = bh % a.Hv;
  const Chunk ch = a.chunks[c];
  const std::int64_t t = std::int64_t(b) * a.Tl + ch.begin;
  const std::int64_t qk_at = (t * a.Hk + hv / a.G) * a.K, v_at = (t * a.Hv + hv) * a.V;
  const std::int64_t qk_stride = std::int64_t(a.Hk) * a.K, v_stride = std::int64_t(a.Hv) * a.V;
  gather(a.in.q + qk_at, qk_stride, ch.rows, a.K, a.C, buf.q);
  gather(a.in.k + qk_at, qk_stride, ch.rows, a.K, a.C, buf.k);
  gather(a.in.v + v_at, v_stride, ch.rows, a.V, a.C, buf.v);
  gather(a.in.g + t * a.Hv + hv, a.Hv, ch.rows, 1, a.C, buf.g);
  gather(a.in.beta + t * a.Hv + hv, a.Hv, ch.rows, 1, a.C, buf.beta);
}

template <typename T>
__device__ ChunkKernel<T, CudaExec> kernel_of(const PassArgs<T>& a, const BlockBuffers<T>& buf) {
  return ChunkKernel<T, CudaExec>(a.C, a.K, a.V, a.scale, buf.kernel, CudaExec{a.gemm});
}

template <typename T>
__global__ void prepare_kernel(PassArgs<T> a) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks);
    const std::int64_t c = job % a.num_chunks;
    gather_rows(a, bh, c, buf);
    __syncthreads();
    math.prepare(buf.rows(), a.factors_of(bh, c));  // ends with a barrier
  }
}

// ---- The V-tiled sequential walks (gdn/pass_walks.h: the job bodies, shared with the CPU
// tests): one block per (batch * value head, column tile) job, the tile in dynamic shared
// memory ----

extern __shared__ __align__(16) unsigned char tile_smem[];

template <typename T>
__device__ T* tile_of_block() {
  return reinterpret_cast<T*>(tile_smem);
}

template <typename T>
__device__ ChunkKernel<T, CudaExec> tile_kernel_of(const PassArgs<T>& a) {
  // The *_cols forms only: they need no workspace.
  return ChunkKernel<T, CudaExec>(a.C, a.K, a.V, a.scale, nullptr, CudaExec{a.gemm});
}

template <typename T>
__global__ void transition_kernel(PassArgs<T> a, T* M, T* U, int bv) {
  auto math = tile_kernel_of(a);
  const CudaExec ex{a.gemm};
  const std::int64_t jobs =
      std::int64_t(a.B) * a.Hv * (walk::tiles(a.K, bv) + walk::tiles(a.V, bv));
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x)
    walk::transition(math, ex, a, M, U, bv, job, tile_of_block<T>());
}

template <typename T>
__global__ void state_walk_kernel(PassArgs<T> a, const T* h_in, T* ht, int bv) {
  auto math = tile_kernel_of(a);
  const CudaExec ex{a.gemm};
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * walk::tiles(a.V, bv);
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x)
    walk::state_walk(math, ex, a, h_in, ht, bv, job, tile_of_block<T>());
}

template <typename T>
__global__ void adjoint_kernel(PassArgs<T> a, const T* dO, const T* dht, T* D, int bv) {
  auto math = tile_kernel_of(a);
  const CudaExec ex{a.gemm};
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * walk::tiles(a.V, bv);
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x)
    walk::adjoint(math, ex, a, dO, dht, D, bv, job, tile_of_block<T>());
}

template <typename T>
__global__ void backward_walk_kernel(PassArgs<T> a, const T* lambda, const T* dO, const T* dht,
                                     T* dh0, int bv) {
  auto math = tile_kernel_of(a);
  const CudaExec ex{a.gemm};
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * walk::tiles(a.V, bv);
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x)
    walk::backward_walk(math, ex, a, lambda, dO, dht, dh0, bv, job, tile_of_block<T>());
}

// LocalPass::output, part (b): every chunk's outputs from its entry state at once, one
// block per (batch * value head, chunk) job (ChunkKernel::outputs: the same GEMM calls as
// the step's, so the same bits as output_from_states, which steps the full width).
template <typename T>
__global__ void outputs_kernel(PassArgs<T> a, T* o) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int V = a.V;
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks), b = bh / a.Hv, hv = bh % a.Hv;
    const std::int64_t c = job % a.num_chunks;
    math.outputs(a.factors_of(bh, c), a.entry_state(bh, c), buf.o);  // barriers in its GEMMs
    const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
    scatter(buf.o, a.chunks[c].rows, V, o + (t * a.Hv + hv) * V, std::int64_t(a.Hv) * V);
    __syncthreads();  // the next job overwrites buf.o
  }
}

// output()'s outputs from the entry states it kept, one block per (batch * value
// head, chunk) job: no chunk waits for the one before. Where the factors are not made
// yet, each job makes its chunk's into the factor buffer first (prepare_kernel's work,
// the same bits), so adjoint() finds them there.
template <typename T>
__global__ void output_from_states_kernel(PassArgs<T> a, T* o, T* ht) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int V = a.V;
  const std::int64_t KV = std::int64_t(a.K) * V;
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks), b = bh / a.Hv, hv = bh % a.Hv;
    const std::int64_t c = job % a.num_chunks;
    if (!a.prepared) {
      gather_rows(a, bh, c, buf);
      __syncthreads();
      math.prepare(buf.rows(), a.factors_of(bh, c));  // ends with a barrier
    }
    block_copy(buf.h, a.entry_state(bh, c), KV);  // step's entry barrier orders it
    math.step(a.factors_of(bh, c), buf.h, buf.o);
    const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
    scatter(buf.o, a.chunks[c].rows, V, o + (t * a.Hv + hv) * V, std::int64_t(a.Hv) * V);
    // The last chunk of a sequence that ends in the slice leaves with its final state.
    const Segment s = a.segments[a.segment_of(c)];
    if (ht && s.ends && c == s.first_chunk + s.num_chunks - 1)
      block_copy(ht + a.state_offset(a.seq_of(s, b), hv), buf.h, KV);
    __syncthreads();  // the next job overwrites the row buffers, buf.h and buf.o
  }
}

// Backward, part (b): one block per (batch * value head, chunk) job, the chunk's whole
// backward from its entry state (output()) and exit adjoint (part (a)); the entry adjoint it
// returns in buf.h is part (a)'s too and is dropped. dq, dk per value head go to dqv, dkv
// ([G, B, Tl, Hk, K]); summed per group afterwards.
template <typename T>
__global__ void backward_chunks_kernel(PassArgs<T> a, const T* dO, GdnGradView<T> gr, T* dqv,
                                       T* dkv) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int K = a.K, V = a.V, G = a.G;
  const std::int64_t KV = std::int64_t(K) * V;
  const std::int64_t qk_elems = std::int64_t(a.B) * a.Tl * a.Hk * K;
  const std::int64_t qk_stride = std::int64_t(a.Hk) * K, v_stride = std::int64_t(a.Hv) * V;
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks), b = bh / a.Hv, hv = bh % a.Hv, hk = hv / G;
    const std::int64_t c = job % a.num_chunks;
    const Chunk ch = a.chunks[c];
    const std::int64_t t = std::int64_t(b) * a.Tl + ch.begin;
    const std::int64_t qk_at = (t * a.Hk + hk) * K, v_at = (t * a.Hv + hv) * V;
    gather_rows(a, bh, c, buf);
    gather(dO + v_at, v_stride, ch.rows, V, a.C, buf.dO);
    block_copy(buf.h, a.exit_adjoint(bh, c), KV);
    __syncthreads();
    math.backward(buf.rows(), a.entry_state(bh, c), buf.dO, buf.h, buf.grads());
    const std::int64_t head = std::int64_t(hv % G) * qk_elems;
    scatter(buf.dq, ch.rows, K, dqv + head + qk_at, qk_stride);
    scatter(buf.dk, ch.rows, K, dkv + head + qk_at, qk_stride);
    scatter(buf.dv, ch.rows, V, gr.dv + v_at, v_stride);
    scatter(buf.dg, ch.rows, 1, gr.dg + t * a.Hv + hv, a.Hv);
    scatter(buf.dbeta, ch.rows, 1, gr.dbeta + t * a.Hv + hv, a.Hv);
    __syncthreads();  // the next job overwrites the row buffers
  }
}

// out[x] = sum over the G blocks of per_head (the key head's gradient).
template <typename T>
__global__ void sum_head_groups_kernel(const T* per_head, std::int64_t n, int G, T* out) {
  for (std::int64_t x = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; x < n;
       x += std::int64_t(gridDim.x) * blockDim.x) {
    T acc = 0;
    for (int j = 0; j < G; ++j) acc += per_head[j * n + x];
    out[x] = acc;
  }
}

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
  const std::int64_t bh = std::int64_t(a.B) * a.Hv;
  return bh * ((a.V + 63) / 64) >= sm_count() ? 64 : 32;
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
void prepare(Cuda, const PassArgs<T>& args) {
  const PassArgs<T> a = configured(args);
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (register_prepare(a)) return;
  prepare_kernel<T><<<blocks_for(jobs), kThreads>>>(a);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void transition(Cuda, const PassArgs<T>& args, T* M, T* U) {
  const PassArgs<T> a = configured(args);
  if (a.B * a.Hv == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (register_transition(a, M, U, walk_width(a))) return;
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
  if (!walked) {
    const WalkLaunch l = walk_launch(a, state_walk_kernel<T>);
    const std::int64_t tiles = (a.V + l.bv - 1) / l.bv;
    state_walk_kernel<T><<<walk_grid(a.B * a.Hv * tiles), kThreads, l.smem>>>(a, h_in, ht, l.bv);
    GDN_CUDA_CHECK(cudaGetLastError());
  }
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (register_outputs(a, o)) return;
  outputs_kernel<T><<<blocks_for(jobs), kThreads>>>(a, o);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void output_from_states(Cuda, const PassArgs<T>& args, T* o, T* ht) {
  const PassArgs<T> a = configured(args);
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  output_from_states_kernel<T><<<blocks_for(jobs), kThreads>>>(a, o, ht);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void adjoint(Cuda, const PassArgs<T>& args, const T* dO, const T* dht, T* D) {
  const PassArgs<T> a = configured(args);
  if (a.B * a.Hv == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (register_adjoint(a, dO, dht, D, walk_width(a))) return;
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
  if (!split) {
    backward_chunks_kernel<T><<<blocks_for(jobs), kThreads>>>(a, dO, gr, dqv, dkv);
    GDN_CUDA_CHECK(cudaGetLastError());
  }
  const std::int64_t qk_elems = std::int64_t(a.B) * a.Tl * a.Hk * a.K;
  if (qk_elems == 0) return;
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
  template void prepare(Cuda, const PassArgs<T>&);                                                \
  template void transition(Cuda, const PassArgs<T>&, T*, T*);                                     \
  template void output(Cuda, const PassArgs<T>&, const T*, T*, T*);                               \
  template void output_from_states(Cuda, const PassArgs<T>&, T*, T*);                             \
  template void adjoint(Cuda, const PassArgs<T>&, const T*, const T*, T*);                        \
  template void backward(Cuda, const PassArgs<T>&, const T*, const T*, const T*, GdnGradView<T>&, \
                         T*, T*);                                                                 \
  }
