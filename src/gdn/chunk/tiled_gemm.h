// The block GEMM of CudaExec (cuda_exec.cuh): C = beta C + alpha op(A) op(B), row-major
// (la::gemm's contract), by kTileThreads threads through shared-memory tiles, written as
// plain host/device C++ over a thread id and a barrier so that the CPU tests run it on
// emulated block threads (tests/unit/test_chunk_kernel.cpp). Each C entry is one thread's sum in
// increasing k order, so the bits do not depend on n, RN or the entry's column. The tiling,
// the thread layout and the Structure hint: docs/design.md §2e.
#pragma once

#include "core/hd.h"
#include "ops/gemm/structure.h"

namespace gdn {

constexpr int kTileThreads = 256;
constexpr int kTileK = 16;

// Staging elements one tiled_gemm<RM, RN> needs: As then Bs (the rows padded by one
// element, so that the k-major stores of the non-transposed loads spread over the banks).
template <int RM, int RN>
GDN_HD constexpr int tiled_gemm_stage_elems() {
  return kTileK * (16 * RM + 1) + kTileK * (16 * RN + 1);
}

// Called by all kTileThreads threads with the same arguments; sync() is the block barrier.
// The caller provides the barriers around the call (CudaExec::gemm's contract); inside, the
// staging buffer is reused slice after slice behind two barriers per slice.
template <int RM, int RN, typename T, typename Sync>
GDN_HD void tiled_gemm(int tid, const Sync& sync, T* stage, bool ta, bool tb, int m, int n, int k,
                       T alpha, const T* A, int lda, const T* B, int ldb, T beta, T* C, int ldc,
                       Structure s) {
  constexpr int TM = 16 * RM, TN = 16 * RN, KT = kTileK, LA = TM + 1, LB = TN + 1;
  T* As = stage;
  T* Bs = stage + KT * LA;
  const int ty = tid / 16, tx = tid % 16;
  const int tiles_m = (m + TM - 1) / TM, tiles_n = (n + TN - 1) / TN;
  for (int tile = 0; tile < tiles_m * tiles_n; ++tile) {
    const int i0 = (tile / tiles_n) * TM, j0 = (tile % tiles_n) * TN;
    // Uniform over the block: every thread skips the same tiles and slices.
    if (s == Structure::kLowerC && j0 > i0 + TM - 1) continue;  // wholly above the diagonal
    int p_lo = 0, p_hi = k;
    if (s == Structure::kLowerA) p_hi = i0 + TM < k ? i0 + TM : k;  // op(A)(i, p) = 0, p > i
    if (s == Structure::kUpperA) p_lo = i0 < k ? i0 : k;            // op(A)(i, p) = 0, p < i
    T acc[RM][RN];
    for (int r = 0; r < RM; ++r)
      for (int c = 0; c < RN; ++c) acc[r][c] = T(0);
    for (int p0 = p_lo; p0 < p_hi; p0 += KT) {
      const int kk = p_hi - p0 < KT ? p_hi - p0 : KT;
      for (int x = tid; x < KT * TM; x += kTileThreads) {
        // ta: op(A)(i, p) = A[p lda + i], i contiguous; else A[i lda + p], p contiguous.
        const int ii = ta ? x % TM : x / KT, pp = ta ? x / TM : x % KT;
        const int i = i0 + ii, p = p0 + pp;
        As[pp * LA + ii] = i < m && pp < kk ? (ta ? A[p * lda + i] : A[i * lda + p]) : T(0);
      }
      for (int x = tid; x < KT * TN; x += kTileThreads) {
        // tb: op(B)(p, j) = B[j ldb + p], p contiguous; else B[p ldb + j], j contiguous.
        const int jj = tb ? x / KT : x % TN, pp = tb ? x % KT : x / TN;
        const int j = j0 + jj, p = p0 + pp;
        Bs[pp * LB + jj] = j < n && pp < kk ? (tb ? B[j * ldb + p] : B[p * ldb + j]) : T(0);
      }
      sync();
      for (int pp = 0; pp < kk; ++pp) {
        T a[RM], b[RN];
        for (int r = 0; r < RM; ++r) a[r] = As[pp * LA + ty + 16 * r];
        for (int c = 0; c < RN; ++c) b[c] = Bs[pp * LB + tx + 16 * c];
        for (int r = 0; r < RM; ++r)
          for (int c = 0; c < RN; ++c) acc[r][c] += a[r] * b[c];
      }
      sync();  // the next slice overwrites As, Bs
    }
    for (int r = 0; r < RM; ++r)
      for (int c = 0; c < RN; ++c) {
        const int i = i0 + ty + 16 * r, j = j0 + tx + 16 * c;
        if (i < m && j < n) {
          T& out = C[i * ldc + j];
          out = (beta == T(0) ? T(0) : beta * out) + alpha * acc[r][c];
        }
      }
  }
}

}  // namespace gdn
