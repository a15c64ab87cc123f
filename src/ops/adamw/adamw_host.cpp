// AdamW and the gradient-norm pieces on the host; element-wise, so threads cannot change
// the result (sum_squares is one sequential sum).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/adamw/adamw.h"
#include "ops/host_util.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

template <typename T>
void adamw_update(Host, T* p, const T* g, T* m, T* v, i64 n, double lr, double beta1, double beta2,
                  double eps, double wd, i64 step) {
  const double bc1 = 1.0 - std::pow(beta1, double(step + 1));
  const double bc2 = 1.0 - std::pow(beta2, double(step + 1));
  const double keep = 1.0 - lr * wd;  // decoupled decay, PyTorch's order: before the update
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (i64 e = 0; e < n; ++e) {
    const double gd = double(g[e]);
    const double me = beta1 * double(m[e]) + (1.0 - beta1) * gd;
    const double ve = beta2 * double(v[e]) + (1.0 - beta2) * gd * gd;
    m[e] = T(me);
    v[e] = T(ve);
    const double update = (me / bc1) / (std::sqrt(ve / bc2) + eps);
    p[e] = T(double(p[e]) * keep - lr * update);
  }
}

template <typename T>
double sum_squares(Host, const T* g, i64 n) {
  double sq = 0;
  for (i64 e = 0; e < n; ++e) sq += double(g[e]) * double(g[e]);
  return sq;
}

template <typename T>
void scale(Host, T* g, i64 n, double s) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (i64 e = 0; e < n; ++e) g[e] = T(double(g[e]) * s);
}

template void adamw_update(Host, float*, const float*, float*, float*, std::int64_t, double, double,
                           double, double, double, std::int64_t);
template void adamw_update(Host, double*, const double*, double*, double*, std::int64_t, double,
                           double, double, double, double, std::int64_t);
template double sum_squares(Host, const float* g, std::int64_t n);
template double sum_squares(Host, const double* g, std::int64_t n);
template void scale(Host, float*, std::int64_t, double);
template void scale(Host, double*, std::int64_t, double);

}  // namespace gdn::ops
