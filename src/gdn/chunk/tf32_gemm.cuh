// An opt-in tensor-core form of CudaExec's block GEMM for float: WMMA TF32 inputs, fp32
// accumulation, 256 threads, about 1e-3 relative, so off by default. See docs/design.md §2e.
#pragma once

#include <mma.h>

#include "ops/gemm/structure.h"

namespace gdn {

constexpr int kTf32Ld = 68;  // staged row length: 64 + 4 (wmma wants a multiple of 4 floats)
// Floats of staging the TF32 GEMM needs: As, Bs (16 x 68 each) and the 64 x 68 output tile.
constexpr int kTf32StageElems = 2 * 16 * kTf32Ld + 64 * kTf32Ld;

// stage: kTf32StageElems floats, 32-byte aligned. Called by all 256 threads; the caller
// provides the barriers around the call.
// Compiled only for sm_80 and later (TF32 WMMA); CudaExec takes the SIMT path elsewhere.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
template <int FN>
__device__ void tf32_gemm(float* stage, bool ta, bool tb, int m, int n, int k, float alpha,
                          const float* A, int lda, const float* B, int ldb, float beta, float* C,
                          int ldc, Structure s) {
  namespace wmma = nvcuda::wmma;
  constexpr int TM = 64, TN = 16 * FN, KT = 16, LD = kTf32Ld, PER_WARP = FN / 2;
  float* As = stage;
  float* Bs = stage + KT * LD;
  float* Out = stage + 2 * KT * LD;
  const int tid = int(threadIdx.x), warp = tid / 32;
  const int fr = warp / 2;  // this warp's fragment row; columns (warp % 2) PER_WARP + c
  const int tiles_m = (m + TM - 1) / TM, tiles_n = (n + TN - 1) / TN;
  for (int tile = 0; tile < tiles_m * tiles_n; ++tile) {
    const int i0 = (tile / tiles_n) * TM, j0 = (tile % tiles_n) * TN;
    if (s == Structure::kLowerC && j0 > i0 + TM - 1) continue;
    int p_lo = 0, p_hi = k;
    if (s == Structure::kLowerA) p_hi = i0 + TM < k ? i0 + TM : k;
    if (s == Structure::kUpperA) p_lo = i0 < k ? i0 : k;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[PER_WARP];
    for (int c = 0; c < PER_WARP; ++c) wmma::fill_fragment(acc[c], 0.0f);
    for (int p0 = p_lo; p0 < p_hi; p0 += KT) {
      const int kk = p_hi - p0 < KT ? p_hi - p0 : KT;
      for (int x = tid; x < KT * TM; x += 256) {
        const int ii = ta ? x % TM : x / KT, pp = ta ? x / TM : x % KT;
        const int i = i0 + ii, p = p0 + pp;
        const float v = i < m && pp < kk ? (ta ? A[p * lda + i] : A[i * lda + p]) : 0.0f;
        As[pp * LD + ii] = wmma::__float_to_tf32(v);
      }
      for (int x = tid; x < KT * TN; x += 256) {
        const int jj = tb ? x / KT : x % TN, pp = tb ? x % KT : x / TN;
        const int j = j0 + jj, p = p0 + pp;
        const float v = j < n && pp < kk ? (tb ? B[j * ldb + p] : B[p * ldb + j]) : 0.0f;
        Bs[pp * LD + jj] = wmma::__float_to_tf32(v);
      }
      __syncthreads();
      for (int ks = 0; ks < KT; ks += 8) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> a;
        wmma::load_matrix_sync(a, As + ks * LD + fr * 16, LD);
        for (int c = 0; c < PER_WARP; ++c) {
          const int fc = (warp % 2) * PER_WARP + c;
          wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
          wmma::load_matrix_sync(b, Bs + ks * LD + fc * 16, LD);
          wmma::mma_sync(acc[c], a, b, acc[c]);
        }
      }
      __syncthreads();  // the next slice overwrites As, Bs
    }
    for (int c = 0; c < PER_WARP; ++c) {
      const int fc = (warp % 2) * PER_WARP + c;
      wmma::store_matrix_sync(Out + fr * 16 * LD + fc * 16, acc[c], LD, wmma::mem_row_major);
    }
    __syncthreads();
    for (int x = tid; x < TM * TN; x += 256) {
      const int ii = x / TN, jj = x % TN, i = i0 + ii, j = j0 + jj;
      if (i < m && j < n) {
        float& out = C[i * ldc + j];
        out = (beta == 0.0f ? 0.0f : beta * out) + alpha * Out[ii * LD + jj];
      }
    }
    __syncthreads();  // the next tile overwrites Out
  }
}
#endif

}  // namespace gdn
