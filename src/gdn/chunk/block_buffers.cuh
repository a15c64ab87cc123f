// What the fp32 and fp64 CUDA kernels of the phases share (gdn/<phase>/<phase>_cuda.cu): a
// chunk job's slice of the workspace (the ChunkKernel's scratch, then the chunk's rows),
// block-cooperative copies, and the dynamic shared tile of the V-tiled walks.
#pragma once

#include "gdn/chunk/chunk_kernel.h"
#include "gdn/chunk/cuda_exec.cuh"
#include "gdn/chunk/pass_args.h"

namespace gdn::pass {

namespace {  // each translation unit that includes this (float, double) compiles its own

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

// ---- The V-tiled sequential walks (gdn/chunk/walk_tiles.h, gdn/state_walk/state_walk_tiled.h,
// gdn/adjoint_walk/adjoint_walk_tiled.h: the job bodies, shared with the CPU tests): one block per
// (batch * value head, column tile) job, the tile in dynamic shared memory ----

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

}  // namespace

}  // namespace gdn::pass
