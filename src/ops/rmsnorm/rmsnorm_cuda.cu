// RMSNorm on the GPU: one warp per row; dw by the deterministic column sums.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "ops/cuda_util.cuh"
#include "ops/rmsnorm/rmsnorm.h"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void rmsnorm_forward_kernel(const T* x, const T* w, i64 N, int d, double eps, T* y) {
  GDN_FOR_EACH_WARP_ROW(i, lane, N) {
    const T* xi = x + i * d;
    const double r = 1.0 / ::sqrt(warp_row_dot(xi, xi, d, lane) / d + eps);
    for (int j = lane; j < d; j += kWarp)
      y[i * d + j] = T(double(xi[j]) * r * (1.0 + double(w[j])));
  }
}

// rs[i] = 1 / rms of row i (when rs is given); dx (when given) as the host.
template <typename T>
__global__ void rmsnorm_backward_rows_kernel(const T* x, const T* w, const T* dy, i64 N, int d,
                                             double eps, T* dx, double* rs) {
  GDN_FOR_EACH_WARP_ROW(i, lane, N) {
    const T *xi = x + i * d, *gi = dy + i * d;
    double s = 0, dot = 0;
    for (int j = lane; j < d; j += kWarp) {
      s += double(xi[j]) * double(xi[j]);
      dot += double(gi[j]) * (1.0 + double(w[j])) * double(xi[j]);
    }
    const double r = 1.0 / ::sqrt(warp_sum(s) / d + eps);
    dot = warp_sum(dot);
    if (rs && lane == 0) rs[i] = r;
    if (!dx) continue;
    const double c = r * r * r / d * dot;
    for (int j = lane; j < d; j += kWarp)
      dx[i * d + j] = T(r * (1.0 + double(w[j])) * double(gi[j]) - c * double(xi[j]));
  }
}

template <typename T>
struct RmsnormDw {
  const T *x, *dy;
  const double* rs;
  int d;
  T* dw;
  __device__ double operator()(i64 i, int c) const {
    return double(dy[i * d + c]) * double(x[i * d + c]) * rs[i];
  }
  __device__ void add(int c, double s) const { dw[c] += T(s); }
};

}  // namespace

template <typename T>
void rmsnorm_forward(Cuda, const T* x, const T* w, i64 N, int d, double eps, T* y) {
  if (N == 0 || d == 0) return;
  rmsnorm_forward_kernel<T><<<row_blocks(N), kThreads>>>(x, w, N, d, eps, y);
  check_launch();
}

template <typename T>
void rmsnorm_backward(Cuda, const T* x, const T* w, const T* dy, i64 N, int d, double eps, T* dx,
                      T* dw) {
  if (N == 0 || d == 0 || (!dx && !dw)) return;
  Scratch<double> rs{dw ? std::size_t(N) : 0};
  rmsnorm_backward_rows_kernel<T><<<row_blocks(N), kThreads>>>(x, w, dy, N, d, eps, dx, rs.get());
  check_launch();
  if (dw) column_sums(RmsnormDw<T>{x, dy, rs.get(), d, dw}, N, d);
}

template void rmsnorm_forward(Cuda, const float*, const float*, std::int64_t, int, double, float*);
template void rmsnorm_forward(Cuda, const double*, const double*, std::int64_t, int, double,
                              double*);
template void rmsnorm_backward(Cuda, const float*, const float*, const float*, std::int64_t, int,
                               double, float*, float*);
template void rmsnorm_backward(Cuda, const double*, const double*, const double*, std::int64_t, int,
                               double, double*, double*);

}  // namespace gdn::ops
