// Gated RMSNorm on the GPU: one warp per row; dw by the deterministic column sums.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "ops/cuda_util.cuh"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void gated_rmsnorm_forward_kernel(const T* x, const T* z, const T* w, i64 N, int d,
                                             double eps, T* y) {
  GDN_FOR_EACH_WARP_ROW(i, lane, N) {
    const T* xi = x + i * d;
    const double r = 1.0 / ::sqrt(warp_row_dot(xi, xi, d, lane) / d + eps);
    for (int j = lane; j < d; j += kWarp) {
      const double zj = z[i * d + j];
      const double silu = zj * sigmoid_d(zj);
      y[i * d + j] = T(double(xi[j]) * r * double(w[j]) * silu);
    }
  }
}

template <typename T>
__global__ void gated_rmsnorm_backward_rows_kernel(const T* x, const T* z, const T* w, const T* dy,
                                                   i64 N, int d, double eps, T* dx, T* dz,
                                                   double* rs) {
  GDN_FOR_EACH_WARP_ROW(i, lane, N) {
    const T *xi = x + i * d, *zi = z + i * d, *gi = dy + i * d;
    double ss = 0, dot = 0;
    for (int j = lane; j < d; j += kWarp) {
      ss += double(xi[j]) * double(xi[j]);
      const double zj = zi[j], sg = sigmoid_d(zj);
      dot += double(gi[j]) * (double(w[j]) * zj * sg) * double(xi[j]);
    }
    const double r = 1.0 / ::sqrt(warp_sum(ss) / d + eps);
    dot = warp_sum(dot);
    if (rs && lane == 0) rs[i] = r;
    const double c = r * r * r / d * dot;
    for (int j = lane; j < d; j += kWarp) {
      const double zj = zi[j], sg = sigmoid_d(zj);
      if (dz)
        dz[i * d + j] =
            T(double(gi[j]) * double(xi[j]) * r * double(w[j]) * sg * (1.0 + zj * (1.0 - sg)));
      if (dx) dx[i * d + j] = T(r * (double(w[j]) * zj * sg) * double(gi[j]) - c * double(xi[j]));
    }
  }
}

template <typename T>
struct GatedRmsnormDw {
  const T *x, *z, *dy;
  const double* rs;
  int d;
  T* dw;
  __device__ double operator()(i64 i, int c) const {
    const double zc = z[i * d + c];
    return double(dy[i * d + c]) * double(x[i * d + c]) * rs[i] * zc * sigmoid_d(zc);
  }
  __device__ void add(int c, double s) const { dw[c] += T(s); }
};

}  // namespace

template <typename T>
void gated_rmsnorm_forward(Cuda, const T* x, const T* z, const T* w, i64 N, int d, double eps,
                           T* y) {
  if (N == 0 || d == 0) return;
  gated_rmsnorm_forward_kernel<T><<<row_blocks(N), kThreads>>>(x, z, w, N, d, eps, y);
  check_launch();
}

template <typename T>
void gated_rmsnorm_backward(Cuda, const T* x, const T* z, const T* w, const T* dy, i64 N, int d,
                            double eps, T* dx, T* dz, T* dw) {
  if (N == 0 || d == 0 || (!dx && !dz && !dw)) return;
  Scratch<double> rs{dw ? std::size_t(N) : 0};
  gated_rmsnorm_backward_rows_kernel<T>
      <<<row_blocks(N), kThreads>>>(x, z, w, dy, N, d, eps, dx, dz, rs.get());
  check_launch();
  if (dw) column_sums(GatedRmsnormDw<T>{x, z, dy, rs.get(), d, dw}, N, d);
}

template void gated_rmsnorm_forward(Cuda, const float*, const float*, const float*, std::int64_t,
                                    int, double, float*);
template void gated_rmsnorm_forward(Cuda, const double*, const double*, const double*, std::int64_t,
                                    int, double, double*);
template void gated_rmsnorm_backward(Cuda, const float*, const float*, const float*, const float*,
                                     std::int64_t, int, double, float*, float*, float*);
template void gated_rmsnorm_backward(Cuda, const double*, const double*, const double*,
                                     const double*, std::int64_t, int, double, double*, double*,
                                     double*);

}  // namespace gdn::ops
