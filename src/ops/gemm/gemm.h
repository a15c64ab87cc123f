// Small dense kernels for the host: a register-blocked, row-major GEMM (gemm.cpp).
// The chunk operands (C <= 128, K, V <= 256) sit in L1/L2, so what matters is keeping a
// tile of C in vector registers across the whole reduction, with enough independent FMA
// chains to hide the FMA latency; no BLAS dependency is needed for that.
//
// Rounding: every element of C is one FMA chain over p = 0, 1, ..., k - 1 from zero, then
// C = beta C + alpha acc; it depends on the shapes only (not on the element's place in a
// tile, nor on any thread count), so callers that split work by shape stay bit-identical
// for any OMP_NUM_THREADS.
#pragma once

#include "ops/gemm/simd.h"
#include "ops/gemm/structure.h"

namespace gdn::la {

namespace detail {
template <typename T>
inline constexpr int kLanes = simd::kLanes<T>;
}  // namespace detail

// Rows of C per register tile: 2 kTileRows accumulators, two B vectors and a broadcast
// must fit in the register file (8 rows of two vectors: 19 of AVX-512's 32; 6: 15 of
// AVX2's 16). Callers that split rows into blocks keep whole tiles with multiples of it.
inline constexpr int kTileRows = simd::kVecRegs >= 32 ? 8 : 6;

// C[m x n] = beta * C + alpha * op(A) * op(B), all row-major with leading dimensions.
// op(A) is m x k (A is k x m when ta), op(B) is k x n (B is n x k when tb). beta == 0
// never reads C. `s` says which terms are known zeros or unwanted (structure.h): skipping
// them changes no wanted entry (a skipped term is an exact zero), so the rounding rule above
// still holds. Defined for float and double.
template <typename T>
void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb,
          T beta, T* C, int ldc, Structure s = Structure::kDense);

// Convenience for dense, tightly packed operands.
template <typename T>
void matmul(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, const T* B, T beta, T* C,
            Structure s = Structure::kDense) {
  gemm(ta, tb, m, n, k, alpha, A, ta ? m : k, B, tb ? k : n, beta, C, n, s);
}

template <typename T>
T dot(const T* a, const T* b, int n) {
  T s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace gdn::la
