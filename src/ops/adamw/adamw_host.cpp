// AdamW and the gradient-norm pieces on the host; element-wise, so threads cannot change
// the result (sum_squares sums fixed blocks, see there).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ops/adamw/adamw.h"
#include "ops/host_util.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

template <typename T>
void adamw_update(Host, T* p, const T* g, T* m, T* v, i64 n, double lr, double beta1, double beta2,
                  double eps, double wd, i64 step, double grad_scale) {
  // The per-step constants in double, rounded once to T; the update in T, as PyTorch's
  // AdamW runs it in the parameters' dtype (double division and square root made the f32
  // update compute-bound: 4 lanes instead of 8, at several times the latency).
  const T bc1 = T(1.0 - std::pow(beta1, double(step + 1)));
  const T bc2 = T(1.0 - std::pow(beta2, double(step + 1)));
  const T keep = T(1.0 - lr * wd);  // decoupled decay, PyTorch's order: before the update
  const T b1 = T(beta1), b2 = T(beta2), c1 = T(1.0 - beta1), c2 = T(1.0 - beta2), lr_t = T(lr),
          eps_t = T(eps);
  // Two loops, so that the unclipped one keeps its T-only arithmetic (vectorised in T).
  const auto update_all = [&](auto scaled) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (i64 e = 0; e < n; ++e) {
      const T gd = decltype(scaled)::value ? T(double(g[e]) * grad_scale) : g[e];
      const T me = b1 * m[e] + c1 * gd;
      const T ve = b2 * v[e] + c2 * gd * gd;
      m[e] = me;
      v[e] = ve;
      const T update = (me / bc1) / (std::sqrt(ve / bc2) + eps_t);
      p[e] = p[e] * keep - lr_t * update;
    }
  };
  if (grad_scale == 1.0)
    update_all(std::false_type{});
  else
    update_all(std::true_type{});
}

// Blocks of kSumBlock elements, each summed in kSumLanes running sums (element e into sum
// e mod kSumLanes, combined pairwise at the end), then the block sums in order: the
// result depends on n alone, never on the threads. One running sum over the whole buffer
// was a chain of n dependent adds: ~90 ms for 69M parameters, twice per step.
constexpr i64 kSumBlock = i64(1) << 14;
constexpr int kSumLanes = 8;

template <typename T>
double sum_squares(Host, const T* g, i64 n) {
  const i64 blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> part(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static) if (blocks > 4)
  for (i64 b = 0; b < blocks; ++b) {
    const i64 e0 = b * kSumBlock, e1 = std::min(n, e0 + kSumBlock);
    double s[kSumLanes] = {};
    i64 e = e0;
    for (; e + kSumLanes <= e1; e += kSumLanes)
      for (int j = 0; j < kSumLanes; ++j) s[j] += double(g[e + j]) * double(g[e + j]);
    for (; e < e1; ++e) s[(e - e0) % kSumLanes] += double(g[e]) * double(g[e]);
    for (int w = kSumLanes / 2; w > 0; w /= 2)
      for (int j = 0; j < w; ++j) s[j] += s[j + w];
    part[std::size_t(b)] = s[0];
  }
  double sq = 0;
  for (const double p : part) sq += p;
  return sq;
}

template <typename T>
void scale(Host, T* g, i64 n, double s) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (i64 e = 0; e < n; ++e) g[e] = T(double(g[e]) * s);
}

template void adamw_update(Host, float*, const float*, float*, float*, std::int64_t, double, double,
                           double, double, double, std::int64_t, double);
template void adamw_update(Host, double*, const double*, double*, double*, std::int64_t, double,
                           double, double, double, double, std::int64_t, double);
template double sum_squares(Host, const float* g, std::int64_t n);
template double sum_squares(Host, const double* g, std::int64_t n);
template void scale(Host, float*, std::int64_t, double);
template void scale(Host, double*, std::int64_t, double);

}  // namespace gdn::ops
