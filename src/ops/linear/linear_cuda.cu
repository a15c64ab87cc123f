// Linear on the GPU: float and double through cuBLAS (the handle of runtime/cublas.h); float
// in Precision::bf16 through cuBLASLt on bf16 operands (runtime/cublaslt.h).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/profile.h"
#include "ops/convert/convert.h"
#include "ops/cuda_util.cuh"
#include "ops/linear/linear.h"
#include "runtime/cublas.h"
#include "runtime/cublaslt.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

// ---------------------------------------------------------------------------------------
// Linear (cuBLAS, column-major: a row-major [r, c] array is a column-major [c, r] one)

// The plain float GEMM (cuBLAS's default math: no TF32).
cublasStatus_t gemm(cublasHandle_t h, Precision, cublasOperation_t ta, cublasOperation_t tb, int m,
                    int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                    float beta, float* C, int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc);
}
// Double stays exact in either precision (cuBLAS has no bf16 path for it).
cublasStatus_t gemm(cublasHandle_t h, Precision, cublasOperation_t ta, cublasOperation_t tb, int m,
                    int n, int k, double alpha, const double* A, int lda, const double* B, int ldb,
                    double beta, double* C, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc);
}

// Float in the bf16 mode runs on bf16 operands; double stays exact in either precision.
template <typename T>
constexpr bool bf16_operands(Precision p) {
  return std::is_same_v<T, float> && p == Precision::bf16;
}

// x's n values as bf16 operands (to_bf16_copy: a stream-ordered pool buffer). The weights
// are narrowed per call too: 6 bytes a weight each time, against the 2 N FLOPs per weight
// the call does.
DeviceBuffer<Bf16> narrowed(const float* x, i64 n) {
  return to_bf16_copy<Cuda>(x, n);
}

void check_rows(i64 N, const char* what) {
  GDN_CHECK(N >= 0 && N <= INT_MAX, what, ": ", N, " rows do not fit cuBLAS's int dimensions");
}

}  // namespace

template <typename T>
void linear_forward(Cuda, Precision p, const T* x, const T* W, i64 N, int in, int out, T* y) {
  const profile::Scope scope(profile::kGemm, profile::Charge::by_region);
  cublasHandle_t h = cublas_handle();
  check_rows(N, "linear_forward");
  if (N == 0 || out == 0) return;
  if (in == 0) {  // an empty sum: y = 0 (and cuBLAS wants ld >= 1)
    GDN_CUDA_CHECK(cudaMemset(y, 0, std::size_t(N) * out * sizeof(T)));
    return;
  }
  // y^T [out, N] = W [out, in] x^T [in, N]; W's buffer is W^T column-major (ld in).
  if constexpr (std::is_same_v<T, float>) {
    if (bf16_operands<T>(p)) {
      const DeviceBuffer<Bf16> xb = narrowed(x, N * in), wb = narrowed(W, i64(out) * in);
      lt_matmul_bf16(CUBLAS_OP_T, CUBLAS_OP_N, out, int(N), in, wb.data(), in, xb.data(), in, 0.0f,
                     y, out);
      return;
    }
  }
  GDN_CUBLAS_CHECK(
      gemm(h, p, CUBLAS_OP_T, CUBLAS_OP_N, out, int(N), in, T(1), W, in, x, in, T(0), y, out));
}

template <typename T>
void linear_backward(Cuda, Precision p, const T* x, const T* W, const T* dy, i64 N, int in, int out,
                     T* dx, T* dW, bool accumulate) {
  const profile::Scope scope(profile::kGemm, profile::Charge::by_region);
  check_rows(N, "linear_backward");
  const bool want_dx = dx && N > 0 && in > 0, want_dw = dW && N > 0 && in > 0 && out > 0;
  if (want_dx && out == 0) {
    if (!accumulate) GDN_CUDA_CHECK(cudaMemset(dx, 0, std::size_t(N) * in * sizeof(T)));
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (bf16_operands<T>(p)) {
      if (!want_dx && !want_dw) return;
      const DeviceBuffer<Bf16> dyb = narrowed(dy, N * out);
      if (want_dx) {
        const DeviceBuffer<Bf16> wb = narrowed(W, i64(out) * in);
        lt_matmul_bf16(CUBLAS_OP_N, CUBLAS_OP_N, in, int(N), out, wb.data(), in, dyb.data(), out,
                       accumulate ? 1.0f : 0.0f, dx, in);
      }
      if (want_dw) {
        const DeviceBuffer<Bf16> xb = narrowed(x, N * in);
        lt_matmul_bf16(CUBLAS_OP_N, CUBLAS_OP_T, in, out, int(N), xb.data(), in, dyb.data(), out,
                       1.0f, dW, in);
      }
      return;
    }
  }
  cublasHandle_t h = cublas_handle();
  // dx^T [in, N] = W^T [in, out] dy^T [out, N] (+= with beta = 1 when accumulating).
  if (want_dx)
    GDN_CUBLAS_CHECK(gemm(h, p, CUBLAS_OP_N, CUBLAS_OP_N, in, int(N), out, T(1), W, in, dy, out,
                          accumulate ? T(1) : T(0), dx, in));
  // dW^T [in, out] += x^T [in, N] dy [N, out] (beta = 1: accumulate).
  if (want_dw)
    GDN_CUBLAS_CHECK(
        gemm(h, p, CUBLAS_OP_N, CUBLAS_OP_T, in, out, int(N), T(1), x, in, dy, out, T(1), dW, in));
}

template void linear_forward(Cuda, Precision, const float*, const float*, std::int64_t, int, int,
                             float*);
template void linear_forward(Cuda, Precision, const double*, const double*, std::int64_t, int, int,
                             double*);
template void linear_backward(Cuda, Precision, const float*, const float*, const float*,
                              std::int64_t, int, int, float*, float*, bool);
template void linear_backward(Cuda, Precision, const double*, const double*, const double*,
                              std::int64_t, int, int, double*, double*, bool);

}  // namespace gdn::ops
