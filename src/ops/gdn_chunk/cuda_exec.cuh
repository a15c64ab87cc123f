// The execution policy of ChunkKernel (chunk_kernel.h) on the GPU: one chunk job is one
// CUDA block, its threads split every loop, and __syncthreads is the barrier. The GEMM
// is the simple cooperative one (block_gemm: one C entry per thread at a time, operands
// in global memory). It is written for correctness first; tiling it through shared
// memory (or tensor cores) is the next step and does not change the kernel's source.
#pragma once

#include "ops/gdn_chunk/chunk_kernel.h"

namespace gdn {

struct CudaExec {
  static constexpr bool serial = false;
  __device__ int tid() const { return int(threadIdx.x); }
  __device__ int nthreads() const { return int(blockDim.x); }
  __device__ void sync() const { __syncthreads(); }
  // A barrier on entry (inputs written by other threads are complete; nobody still reads
  // C's old values) and on exit (C is visible to every thread): ChunkKernel's contract.
  // The accumulator is T: fp32 for float, as the issue asks (state and accumulation fp32).
  // The Structure hint is ignored: the full product honours it.
  template <typename T>
  __device__ void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda,
                       const T* B, int ldb, T beta, T* C, int ldc,
                       Structure = Structure::kDense) const {
    __syncthreads();
    block_gemm<T>(tid(), nthreads(), ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    __syncthreads();
  }
};

}  // namespace gdn
