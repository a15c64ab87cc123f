// Gated RMSNorm on the host; dw is a column-chunked reduction in row order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/host_util.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

// The gate's sigmoids are computed a row at a time by la::sigmoid (a vector exp for float,
// libm for double), the rest in double.
template <typename T>
void gated_rmsnorm_forward(Host, const T* x, const T* z, const T* w, i64 N, int d, double eps,
                           T* y) {
#pragma omp parallel
  {
    std::vector<T> sg(static_cast<std::size_t>(d));
#pragma omp for schedule(static)
    for (i64 i = 0; i < N; ++i) {
      const T* xi = x + i * d;
      const double r = inv_rms(xi, d, eps);
      la::sigmoid(z + i * d, d, sg.data());
      for (int j = 0; j < d; ++j) {
        const double silu = double(z[i * d + j]) * double(sg[j]);
        y[i * d + j] = T(double(xi[j]) * r * double(w[j]) * silu);
      }
    }
  }
}

template <typename T>
void gated_rmsnorm_backward(Host, const T* x, const T* z, const T* w, const T* dy, i64 N, int d,
                            double eps, T* dx, T* dz, T* dw) {
  // With s_j = w_j silu(z_j): dx as in rmsnorm with s; dz_j = dy_j x_j r w_j silu'(z_j),
  // silu'(z) = sig(z) (1 + z (1 - sig(z))); dw_j += sum_rows dy_j x_j r silu(z_j).
  std::vector<double> rs(static_cast<std::size_t>(N));
  std::vector<T> sig(static_cast<std::size_t>(N * d));  // sigmoid(z), for all three
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) {
    const T *xi = x + i * d, *zi = z + i * d, *gi = dy + i * d;
    T* sg = sig.data() + i * d;
    la::sigmoid(zi, d, sg);
    const double r = inv_rms(xi, d, eps);
    rs[std::size_t(i)] = r;
    double dot = 0;
    for (int j = 0; j < d; ++j) {
      const double zj = zi[j], sj = sg[j];
      const double s = double(w[j]) * zj * sj;
      dot += double(gi[j]) * s * double(xi[j]);
      if (dz)
        dz[i * d + j] =
            T(double(gi[j]) * double(xi[j]) * r * double(w[j]) * sj * (1.0 + zj * (1.0 - sj)));
    }
    if (!dx) continue;
    const double c = r * r * r / d * dot;
    for (int j = 0; j < d; ++j) {
      const double s = double(w[j]) * double(zi[j]) * double(sg[j]);
      dx[i * d + j] = T(r * s * double(gi[j]) - c * double(xi[j]));
    }
  }
  if (!dw) return;
  add_column_sums(
      N, d,
      [&](i64 i, int c) {
        const i64 k = i * d + c;
        return double(dy[k]) * double(x[k]) * rs[std::size_t(i)] * double(z[k]) * double(sig[k]);
      },
      dw);
}

template void gated_rmsnorm_forward(Host, const float*, const float*, const float*, std::int64_t,
                                    int, double, float*);
template void gated_rmsnorm_forward(Host, const double*, const double*, const double*, std::int64_t,
                                    int, double, double*);
template void gated_rmsnorm_backward(Host, const float*, const float*, const float*, const float*,
                                     std::int64_t, int, double, float*, float*, float*);
template void gated_rmsnorm_backward(Host, const double*, const double*, const double*,
                                     const double*, std::int64_t, int, double, double*, double*,
                                     double*);

}  // namespace gdn::ops
