// Small dense kernels for the chunk math: row-major blocked GEMM and helpers.
// The chunk sizes (C <= 128, K, V <= 256) make every operand fit in L2, so a simple
// blocking over the reduction dimension with a contiguous, vectorisable inner loop is
// what matters; no BLAS dependency is needed for that.
#pragma once

#include <algorithm>
#include <cstring>

namespace gdn::la {

// C[m x n] = beta * C + alpha * op(A) * op(B), all row-major with leading dimensions.
// op(A) is m x k (A is k x m when ta), op(B) is k x n (B is n x k when tb).
template <typename T>
void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb,
          T beta, T* C, int ldc) {
  if (beta == T(0)) {
    for (int i = 0; i < m; ++i) std::fill(C + i * ldc, C + i * ldc + n, T(0));
  } else if (beta != T(1)) {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) C[i * ldc + j] *= beta;
  }
  if (m == 0 || n == 0 || k == 0 || alpha == T(0)) return;
  constexpr int kb = 64;  // reduction block: keeps a panel of B hot in L1
  if (!tb) {
    // Inner loop runs along a row of B and of C: contiguous, vectorised.
    for (int p0 = 0; p0 < k; p0 += kb) {
      const int p1 = std::min(k, p0 + kb);
      for (int i = 0; i < m; ++i) {
        T* c = C + i * ldc;
        for (int p = p0; p < p1; ++p) {
          const T a = alpha * (ta ? A[p * lda + i] : A[i * lda + p]);
          if (a == T(0)) continue;
          const T* b = B + p * ldb;
          for (int j = 0; j < n; ++j) c[j] += a * b[j];
        }
      }
    }
  } else if (!ta) {
    // C = A B^T: each entry is a dot product of two contiguous rows.
    for (int i = 0; i < m; ++i) {
      const T* a = A + i * lda;
      for (int j = 0; j < n; ++j) {
        const T* b = B + j * ldb;
        T s = 0;
        for (int p = 0; p < k; ++p) s += a[p] * b[p];
        C[i * ldc + j] += alpha * s;
      }
    }
  } else {
    // C = A^T B^T: rare; (B A)^T computed entry by entry.
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        T s = 0;
        for (int p = 0; p < k; ++p) s += A[p * lda + i] * B[j * ldb + p];
        C[i * ldc + j] += alpha * s;
      }
  }
}

// Convenience for dense, tightly packed operands.
template <typename T>
void matmul(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, const T* B, T beta, T* C) {
  gemm(ta, tb, m, n, k, alpha, A, ta ? m : k, B, tb ? k : n, beta, C, n);
}

template <typename T>
T dot(const T* a, const T* b, int n) {
  T s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace gdn::la
