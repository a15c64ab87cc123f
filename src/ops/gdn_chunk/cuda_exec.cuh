// The execution policy of ChunkKernel (chunk_kernel.h) on the GPU: one chunk job (or one
// column tile of a sequential walk) is one CUDA block, its threads split every loop, and
// __syncthreads is the barrier.
//
// The GEMM is tiled_gemm (tiled_gemm.h): operands staged through shared memory in k-slices,
// each thread RM x RN outputs in registers, the Structure hint used to skip zero triangles.
// Its staging buffer is a static __shared__ array of this function, so every kernel that
// runs a ChunkKernel holds it once (about 8 KiB for float, 16 KiB for double). The
// accumulator is T (fp32 for float: state and accumulation stay fp32), and each output is
// one thread's sum in a fixed order, independent of the block count or tile widths.
// A block of another size than kTileThreads falls back to block_gemm (one output per
// thread, operands in global memory), the simple form the CPU tests also check.
#pragma once

#include "ops/gdn_chunk/chunk_kernel.h"
#include "ops/gdn_chunk/tiled_gemm.h"

namespace gdn {

struct CudaExec {
  static constexpr bool serial = false;
  __device__ int tid() const { return int(threadIdx.x); }
  __device__ int nthreads() const { return int(blockDim.x); }
  __device__ void sync() const { __syncthreads(); }
  struct Barrier {
    __device__ void operator()() const { __syncthreads(); }
  };
  // A barrier on entry (inputs written by other threads are complete; nobody still reads
  // C's old values, nor the staging buffer) and on exit (C is visible to every thread):
  // ChunkKernel's contract.
  template <typename T>
  __device__ void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda,
                       const T* B, int ldb, T beta, T* C, int ldc,
                       Structure s = Structure::kDense) const {
    __shared__ T stage[tiled_gemm_stage_elems<4, 4>()];
    __syncthreads();
    if (blockDim.x == kTileThreads) {
      // 64 x 32 output tiles where n is narrow (the V-tiled passes' BV = 32 columns), so
      // that no thread idles; 64 x 64 otherwise. The same sums either way.
      if (n <= 32)
        tiled_gemm<4, 2>(tid(), Barrier{}, stage, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                         ldc, s);
      else
        tiled_gemm<4, 4>(tid(), Barrier{}, stage, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                         ldc, s);
    } else {
      block_gemm<T>(tid(), nthreads(), ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    __syncthreads();
  }
};

}  // namespace gdn
