// Small dense kernels for the host: a register-blocked, row-major GEMM (register_gemm.h),
// compiled once per ISA and chosen at run time (gemm_path.h).
// The chunk operands (C <= 128, K, V <= 256) sit in L1/L2, so what matters is keeping a
// tile of C in vector registers across the whole reduction, with enough independent FMA
// chains to hide the FMA latency; no BLAS dependency is needed for that.
//
// Rounding: every element of C is one FMA chain over p = 0, 1, ..., k - 1 from zero, then
// C = beta C + alpha acc; it depends on the shapes only (not on the element's place in a
// tile, nor on any thread count), so callers that split work by shape stay bit-identical
// for any OMP_NUM_THREADS.
#pragma once

#include "core/bf16.h"
#include "ops/gemm/structure.h"

namespace gdn::la {

// The shape of the register tile of the path in use: its rows of C, and the elements of T
// per vector (a tile is two vectors wide). Callers that cut C into row blocks and column
// strips keep whole tiles with them; the rounding does not depend on either.
int gemm_tile_rows();
template <typename T>
int gemm_lanes();

// C[m x n] = beta * C + alpha * op(A) * op(B), all row-major with leading dimensions.
// op(A) is m x k (A is k x m when ta), op(B) is k x n (B is n x k when tb). beta == 0
// never reads C. `s` says which terms are known zeros or unwanted (structure.h): skipping
// them changes no wanted entry (a skipped term is an exact zero), so the rounding rule above
// still holds. Defined for float and double.
template <typename T>
void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb,
          T beta, T* C, int ldc, Structure s = Structure::kDense);

// C[m x n] = beta C + A B with bf16 operands and float sums, the numerics of vdpbf16ps
// (and of AMX and tensor cores): each product of two bf16 values is exact in float; the
// pairs of k (2q, 2q + 1) are added to the float sum one after the other, the odd one
// first. k is even (pad with a zero pair). A is m rows of k values (row stride lda); B is
// the k x n operand in pairs, B[q * ldb + 2 j + h] = op(B)(2 q + h, j) (ldb >= 2 n).
// beta == 0 never reads C. Inputs below 2^-126 count as zero, as the instruction counts
// them (bf16_operand flushes them); on the AVX512_BF16 path, so do sums below 2^-126.
void gemm_bf16(int m, int n, int k, const Bf16* A, int lda, const Bf16* B, int ldb, float beta,
               float* C, int ldc);

// x as a bf16 GEMM operand: rounded to nearest even, and zero (of x's sign) below 2^-126,
// where vdpbf16ps would count it as zero anyway.
inline Bf16 bf16_operand(float x) {
  const Bf16 b = to_bf16(x);
  return (b.bits & 0x7f80u) == 0 ? Bf16{std::uint16_t(b.bits & 0x8000u)} : b;
}

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
