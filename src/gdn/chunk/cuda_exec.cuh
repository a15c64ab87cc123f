// The execution policy of ChunkKernel (chunk_kernel.h) on the GPU: one job is one CUDA
// block, its threads split every loop, __syncthreads is the barrier, and the GEMM is
// tiled_gemm, or for float on tensor cores: bf16 (mma.sync, ops/mma/mma_bf16.cuh) or TF32
// (tf32_gemm), as `precision` says. See docs/design.md §2e and §2f.
#pragma once

#include <type_traits>

#include "gdn/chunk/chunk_kernel.h"
#include "gdn/chunk/tf32_gemm.cuh"
#include "gdn/chunk/tiled_gemm.h"
#include "ops/mma/mma_bf16.cuh"

namespace gdn {

struct CudaExec {
  static constexpr bool serial = false;
  ChunkGemm precision = ChunkGemm::kFp32;  // what float GEMMs run on (PassArgs::gemm)
  __device__ bool bf16_operands() const { return precision == ChunkGemm::kBf16; }
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
    constexpr int simt = tiled_gemm_stage_elems<4, 4>();
    constexpr int elems =
        std::is_same_v<T, float> && kTf32StageElems > simt ? kTf32StageElems : simt;
    static_assert(elems * sizeof(T) >= mma::BlockTile::kStageElems * sizeof(Bf16) ||
                  !std::is_same_v<T, float>);
    __shared__ __align__(32) T stage[elems];  // wmma wants 32-byte aligned tiles
    __syncthreads();
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800  // tensor cores: sm_80 on; else SIMT
    if constexpr (std::is_same_v<T, float>) {
      if (precision == ChunkGemm::kBf16 && blockDim.x == mma::BlockTile::kThreads) {
        mma::bf16_block_gemm(reinterpret_cast<Bf16*>(stage), ta, tb, m, n, k, alpha, A, lda, B, ldb,
                             beta, C, ldc, s);
        __syncthreads();
        return;
      }
      if (precision == ChunkGemm::kTf32 && blockDim.x == kTileThreads) {
        if (n <= 32)
          tf32_gemm<2>(stage, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
        else
          tf32_gemm<4>(stage, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
        __syncthreads();
        return;
      }
    }
#endif
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
