// Small dense kernels for the chunk math: a register-blocked, row-major GEMM.
// The chunk operands (C <= 128, K, V <= 256) fit in L1/L2, so what matters is keeping a
// 4-row tile of C in vector registers across the reduction; no BLAS dependency is needed for that.
// B^T operands are transposed once into a scratch buffer so every product runs the same
// micro-kernel.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

namespace gdn::la {

namespace detail {

// One native SIMD register of T as a GCC/Clang vector (the build uses -march=native).
// Explicit vectors keep the accumulator tile in registers, which the auto-vectoriser
// does not manage for this loop nest.
#if defined(__AVX512F__)
inline constexpr int kVecBytes = 64;
#elif defined(__AVX__)
inline constexpr int kVecBytes = 32;
#else
inline constexpr int kVecBytes = 16;
#endif
template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(kVecBytes)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(kVecBytes)));
};
template <typename T>
using Vec = typename VecOf<T>::type;
template <typename T>
inline constexpr int kLanes = int(kVecBytes / sizeof(T));

template <typename T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// C[m x n] += alpha * op(A) * B with B row-major k x n; op(A) = A (m x k) or A^T (TA).
// Micro-tile: 4 rows x one vector of columns, accumulated over the whole reduction.
template <bool TA, typename T>
void gemm_nn(int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb, T* C,
             int ldc) {
  constexpr int L = kLanes<T>;
  auto a_at = [&](int i, int p) { return TA ? A[p * lda + i] : A[i * lda + p]; };
  const int m4 = m - m % 4, nv = n - n % L;
  for (int i0 = 0; i0 < m4; i0 += 4) {
    for (int j0 = 0; j0 < nv; j0 += L) {
      Vec<T> c0 = {}, c1 = {}, c2 = {}, c3 = {};
      for (int p = 0; p < k; ++p) {
        const Vec<T> b = load(B + p * ldb + j0);
        c0 += a_at(i0, p) * b;
        c1 += a_at(i0 + 1, p) * b;
        c2 += a_at(i0 + 2, p) * b;
        c3 += a_at(i0 + 3, p) * b;
      }
      const Vec<T> acc[4] = {c0, c1, c2, c3};
      for (int r = 0; r < 4; ++r) {
        T* c = C + (i0 + r) * ldc + j0;
        const Vec<T> out = load(c) + alpha * acc[r];
        std::memcpy(c, &out, sizeof(out));
      }
    }
  }
  // Tails: the columns past nv of the blocked rows, then the rows past m4.
  auto row_range = [&](int i, int j_begin) {
    for (int p = 0; p < k; ++p) {
      const T a = alpha * a_at(i, p);
      const T* b = B + p * ldb;
      for (int j = j_begin; j < n; ++j) C[i * ldc + j] += a * b[j];
    }
  };
  if (nv < n)
    for (int i = 0; i < m4; ++i) row_range(i, nv);
  for (int i = m4; i < m; ++i) row_range(i, 0);
}

}  // namespace detail

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
  if (tb) {
    // Transpose B (n x k) into k x n scratch so the micro-kernel reads rows of it.
    thread_local std::vector<T> bt;
    bt.resize(std::size_t(k) * n);
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) bt[std::size_t(p) * n + j] = B[j * ldb + p];
    B = bt.data();
    ldb = n;
  }
  if (ta)
    detail::gemm_nn<true>(m, n, k, alpha, A, lda, B, ldb, C, ldc);
  else
    detail::gemm_nn<false>(m, n, k, alpha, A, lda, B, ldb, C, ldc);
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
