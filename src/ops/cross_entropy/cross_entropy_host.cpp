// Cross-entropy on the host.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/gemm/exp.h"
#include "ops/host_util.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

template <typename T>
double cross_entropy(Host, const T* logits, const std::int32_t* targets, i64 N, int V,
                     double grad_scale, T* dlogits) {
  for (i64 i = 0; i < N; ++i)
    GDN_CHECK((targets[i] >= 0 && targets[i] < V) || targets[i] == kIgnoreTarget,
              "cross_entropy: target ", targets[i], " at row ", i, " is out of range [0, ", V,
              ") and not the ignored ", kIgnoreTarget);
  // Per-row losses summed serially afterwards: the total does not depend on the threads.
  // The exponentials a row at a time in T (la::exp_in_place: a vector exp for float, libm
  // for double), their sum in double.
  std::vector<double> row_loss(static_cast<std::size_t>(N));
#pragma omp parallel
  {
    std::vector<T> e(static_cast<std::size_t>(V));
#pragma omp for schedule(static)
    for (i64 i = 0; i < N; ++i) {
      const int t = targets[i];
      if (t == kIgnoreTarget) {
        if (dlogits) std::fill_n(dlogits + i * V, V, T(0));
        continue;  // row_loss stays 0
      }
      const T* l = logits + i * V;
      double mx = -INFINITY;
      for (int j = 0; j < V; ++j) mx = std::max(mx, double(l[j]));
      for (int j = 0; j < V; ++j) e[std::size_t(j)] = T(double(l[j]) - mx);
      la::exp_in_place(e.data(), V);
      double s = 0;
      for (int j = 0; j < V; ++j) s += double(e[std::size_t(j)]);
      const double lse = mx + std::log(s);
      row_loss[std::size_t(i)] = lse - double(l[t]);
      if (!dlogits) continue;
      T* dl = dlogits + i * V;
      for (int j = 0; j < V; ++j) dl[j] = T(double(l[j]) - lse);
      la::exp_in_place(dl, V);
      for (int j = 0; j < V; ++j) dl[j] = T(double(dl[j]) * grad_scale);
      dl[t] = T(double(dl[t]) - grad_scale);
    }
  }
  double total = 0;
  for (double v : row_loss) total += v;
  return total;
}

template double cross_entropy(Host, const float* logits, const std::int32_t* targets,
                              std::int64_t N, int V, double grad_scale, float* dlogits);
template double cross_entropy(Host, const double* logits, const std::int32_t* targets,
                              std::int64_t N, int V, double grad_scale, double* dlogits);

}  // namespace gdn::ops
