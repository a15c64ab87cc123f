// Linear on the GPU through cuBLAS (the handle of runtime/cublas.h).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/profile.h"
#include "ops/cuda_util.cuh"
#include "ops/linear/linear.h"
#include "runtime/cublas.h"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

// ---------------------------------------------------------------------------------------
// Linear (cuBLAS, column-major: a row-major [r, c] array is a column-major [c, r] one)

// In the bf16 mode (core/precision.h) cuBLAS rounds the float operands to bf16 for the
// tensor cores and accumulates in float (CUBLAS_COMPUTE_32F_FAST_16BF): the host's
// bf16 matmul, up to the order of the sums.
cublasStatus_t gemm(cublasHandle_t h, Precision p, cublasOperation_t ta, cublasOperation_t tb,
                    int m, int n, int k, float alpha, const float* A, int lda, const float* B,
                    int ldb, float beta, float* C, int ldc) {
  if (p == Precision::bf16)
    return cublasGemmEx(h, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta,
                        C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
  return cublasSgemm(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc);
}
// Double stays exact in either precision (cuBLAS has no bf16 path for it).
cublasStatus_t gemm(cublasHandle_t h, Precision, cublasOperation_t ta, cublasOperation_t tb, int m,
                    int n, int k, double alpha, const double* A, int lda, const double* B, int ldb,
                    double beta, double* C, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc);
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
  GDN_CUBLAS_CHECK(
      gemm(h, p, CUBLAS_OP_T, CUBLAS_OP_N, out, int(N), in, T(1), W, in, x, in, T(0), y, out));
}

template <typename T>
void linear_backward(Cuda, Precision p, const T* x, const T* W, const T* dy, i64 N, int in, int out,
                     T* dx, T* dW, bool accumulate) {
  const profile::Scope scope(profile::kGemm, profile::Charge::by_region);
  cublasHandle_t h = cublas_handle();
  check_rows(N, "linear_backward");
  if (dx && N > 0 && in > 0) {
    if (out == 0) {
      if (!accumulate) GDN_CUDA_CHECK(cudaMemset(dx, 0, std::size_t(N) * in * sizeof(T)));
    } else {
      // dx^T [in, N] = W^T [in, out] dy^T [out, N] (+= with beta = 1 when accumulating).
      GDN_CUBLAS_CHECK(gemm(h, p, CUBLAS_OP_N, CUBLAS_OP_N, in, int(N), out, T(1), W, in, dy, out,
                            accumulate ? T(1) : T(0), dx, in));
    }
  }
  if (dW && N > 0 && in > 0 && out > 0) {
    // dW^T [in, out] += x^T [in, N] dy [N, out] (beta = 1: accumulate).
    GDN_CUBLAS_CHECK(
        gemm(h, p, CUBLAS_OP_N, CUBLAS_OP_T, in, out, int(N), T(1), x, in, dy, out, T(1), dW, in));
  }
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
