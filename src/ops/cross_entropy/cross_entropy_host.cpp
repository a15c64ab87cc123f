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

namespace {

bool valid_target(std::int32_t t, int V) {
  return (t >= 0 && t < V) || t == kIgnoreTarget;
}

// One row's loss; writes its dlogits unless dl is null. e: V elements of scratch.
// The exponentials in T (la::exp_in_place: a vector exp for float, libm for double), their
// sum in double.
template <typename T>
double row_loss(const T* l, int t, int V, double grad_scale, T* dl, T* e) {
  double mx = -INFINITY;
  for (int j = 0; j < V; ++j) mx = std::max(mx, double(l[j]));
  for (int j = 0; j < V; ++j) e[j] = T(double(l[j]) - mx);
  la::exp_in_place(e, V);
  double s = 0;
  for (int j = 0; j < V; ++j) s += double(e[j]);
  const double lse = mx + std::log(s);
  const double loss = lse - double(l[t]);
  if (!dl) return loss;
  for (int j = 0; j < V; ++j) dl[j] = T(double(l[j]) - lse);
  la::exp_in_place(dl, V);
  for (int j = 0; j < V; ++j) dl[j] = T(double(dl[j]) * grad_scale);
  dl[t] = T(double(dl[t]) - grad_scale);
  return loss;
}

}  // namespace

void check_targets(const CrossEntropyTotal& total, int V) {
  GDN_CHECK(!total.bad, "cross_entropy: target ", total.bad_target, " at row ", total.bad_row,
            " is out of range [0, ", V, ") and not the ignored ", kIgnoreTarget);
}

template <typename T>
void cross_entropy_add(Host, const T* logits, const std::int32_t* targets, i64 N, int V,
                       double grad_scale, T* dlogits, i64 row0, CrossEntropyTotal* total) {
  for (i64 i = 0; i < N && !total->bad; ++i)
    if (!valid_target(targets[i], V)) *total = {total->loss, row0 + i, targets[i], 1};
  // Per-row losses summed serially afterwards: the total does not depend on the threads.
  std::vector<double> loss(static_cast<std::size_t>(N));
#pragma omp parallel
  {
    std::vector<T> e(static_cast<std::size_t>(V));
#pragma omp for schedule(static)
    for (i64 i = 0; i < N; ++i) {
      const int t = targets[i];
      T* dl = dlogits ? dlogits + i * V : nullptr;
      if (valid_target(t, V) && t != kIgnoreTarget)
        loss[std::size_t(i)] = row_loss(logits + i * V, t, V, grad_scale, dl, e.data());
      else if (dl)  // ignored (or invalid): loss 0, zero dlogits
        std::fill_n(dl, V, T(0));
    }
  }
  double sum = 0;
  for (double v : loss) sum += v;
  total->loss += sum;
}

template <typename T>
double cross_entropy(Host, const T* logits, const std::int32_t* targets, i64 N, int V,
                     double grad_scale, T* dlogits) {
  CrossEntropyTotal total;
  for (i64 i = 0; i < N && !total.bad; ++i)  // before anything is written
    if (!valid_target(targets[i], V)) total = {0, i, targets[i], 1};
  check_targets(total, V);
  cross_entropy_add(Host{}, logits, targets, N, V, grad_scale, dlogits, 0, &total);
  return total.loss;
}

template double cross_entropy(Host, const float*, const std::int32_t*, std::int64_t, int, double,
                              float*);
template double cross_entropy(Host, const double*, const std::int32_t*, std::int64_t, int, double,
                              double*);
template void cross_entropy_add(Host, const float*, const std::int32_t*, std::int64_t, int, double,
                                float*, std::int64_t, CrossEntropyTotal*);
template void cross_entropy_add(Host, const double*, const std::int32_t*, std::int64_t, int, double,
                                double*, std::int64_t, CrossEntropyTotal*);

}  // namespace gdn::ops
