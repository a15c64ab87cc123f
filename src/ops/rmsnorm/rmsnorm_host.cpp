// RMSNorm on the host; dw is a column-chunked reduction in row order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/host_util.h"
#include "ops/rmsnorm/rmsnorm.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

template <typename T>
void rmsnorm_forward(Host, const T* x, const T* w, i64 N, int d, double eps, T* y) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) {
    const T* xi = x + i * d;
    const double r = inv_rms(xi, d, eps);
    for (int j = 0; j < d; ++j) y[i * d + j] = T(double(xi[j]) * r * (1.0 + double(w[j])));
  }
}

template <typename T>
void rmsnorm_backward(Host, const T* x, const T* w, const T* dy, i64 N, int d, double eps, T* dx,
                      T* dw) {
  // y_j = x_j r s_j, r = (mean(x^2) + eps)^-1/2, s = 1 + w:
  // dx_i = r s_i dy_i - r^3 / d * x_i * sum_j dy_j s_j x_j;  dw_j += sum_rows dy_j x_j r.
  std::vector<double> rs(static_cast<std::size_t>(N));
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) {
    const T *xi = x + i * d, *gi = dy + i * d;
    const double r = inv_rms(xi, d, eps);
    rs[std::size_t(i)] = r;
    if (!dx) continue;
    const double dot =
        row_sum8(d, [&](int j) { return double(gi[j]) * (1.0 + double(w[j])) * double(xi[j]); });
    const double c = r * r * r / d * dot;
    for (int j = 0; j < d; ++j)
      dx[i * d + j] = T(r * (1.0 + double(w[j])) * double(gi[j]) - c * double(xi[j]));
  }
  if (!dw) return;
  add_column_sums(
      N, d,
      [&](i64 i, int c) {
        return double(dy[i * d + c]) * double(x[i * d + c]) * rs[std::size_t(i)];
      },
      dw);
}

template void rmsnorm_forward(Host, const float*, const float*, std::int64_t, int, double, float*);
template void rmsnorm_forward(Host, const double*, const double*, std::int64_t, int, double,
                              double*);
template void rmsnorm_backward(Host, const float*, const float*, const float*, std::int64_t, int,
                               double, float*, float*);
template void rmsnorm_backward(Host, const double*, const double*, const double*, std::int64_t, int,
                               double, double*, double*);

}  // namespace gdn::ops
