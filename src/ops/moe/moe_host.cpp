// The MoE router and row movement on the host. Every row is independent, so each loop is
// parallel over rows and the bits do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/profile.h"
#include "ops/host_util.h"
#include "ops/moe/moe.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

template <typename T>
void router_forward(Host, const T* logits, i64 N, int E, int k, bool renorm, T* probs,
                    std::int32_t* idx, T* weights) {
  const profile::Scope scope("routing", profile::Charge::by_region);
#pragma omp parallel for schedule(static)
  for (i64 n = 0; n < N; ++n) {
    const T* l = logits + n * E;
    T* p = probs + n * E;
    double mx = l[0], sum = 0;
    for (int e = 1; e < E; ++e) mx = std::max(mx, double(l[e]));
    for (int e = 0; e < E; ++e) sum += std::exp(double(l[e]) - mx);
    for (int e = 0; e < E; ++e) p[e] = T(std::exp(double(l[e]) - mx) / sum);
    // The k largest, largest first; equal probabilities keep the lower index first.
    std::int32_t* id = idx + n * k;
    std::vector<std::int32_t> order(static_cast<std::size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(
        order.begin(), order.begin() + k, order.end(),
        [&](std::int32_t a, std::int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    double top = 0;
    for (int j = 0; j < k; ++j) {
      id[j] = order[std::size_t(j)];
      top += double(p[id[j]]);
    }
    for (int j = 0; j < k; ++j) weights[n * k + j] = renorm ? T(double(p[id[j]]) / top) : p[id[j]];
  }
}

template <typename T>
void router_backward(Host, const T* probs, const std::int32_t* idx, const T* dweights, i64 N, int E,
                     int k, bool renorm, const double* dprob_all, T* dlogits) {
  const profile::Scope scope("routing", profile::Charge::by_region);
#pragma omp parallel for schedule(static)
  for (i64 n = 0; n < N; ++n) {
    const T* p = probs + n * E;
    const std::int32_t* id = idx + n * k;
    const T* dw = dweights + n * k;
    std::vector<double> dp(std::size_t(E), 0.0);
    if (dprob_all)
      for (int e = 0; e < E; ++e) dp[std::size_t(e)] = dprob_all[e];
    if (renorm) {
      // w_j = p_j / S with S the sum of the selected p: dp_j = (dw_j - sum_i dw_i w_i) / S.
      double S = 0, dot = 0;
      for (int j = 0; j < k; ++j) S += double(p[id[j]]);
      for (int j = 0; j < k; ++j) dot += double(dw[j]) * double(p[id[j]]) / S;
      for (int j = 0; j < k; ++j) dp[std::size_t(id[j])] += (double(dw[j]) - dot) / S;
    } else {
      for (int j = 0; j < k; ++j) dp[std::size_t(id[j])] += double(dw[j]);
    }
    // Softmax: dl_e = p_e (dp_e - sum_f p_f dp_f).
    double s = 0;
    for (int e = 0; e < E; ++e) s += double(p[e]) * dp[std::size_t(e)];
    for (int e = 0; e < E; ++e) dlogits[n * E + e] = T(double(p[e]) * (dp[std::size_t(e)] - s));
  }
}

template <typename T>
void gather_rows(Host, const T* src, const i64* rows, i64 n, int d, T* dst) {
  const profile::Scope scope("dispatch", profile::Charge::by_region);
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < n; ++i) std::copy_n(src + rows[i] * d, d, dst + i * d);
}

template <typename T>
void scatter_add_rows(Host, const T* src, const i64* rows, const T* scale, i64 n, int d, T* dst) {
  const profile::Scope scope("dispatch", profile::Charge::by_region);
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < n; ++i) {
    const T s = scale ? scale[i] : T(1);
    T* y = dst + rows[i] * d;
    for (int c = 0; c < d; ++c) y[c] += s * src[i * d + c];
  }
}

template <typename T>
void row_dots(Host, const T* a, const T* b, i64 n, int d, T* out) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < n; ++i) {
    out[i] = T(row_sum8(d, [&](int c) { return double(a[i * d + c]) * double(b[i * d + c]); }));
  }
}

template <typename T>
void scale_rows(Host, const T* x, const T* s, i64 n, int d, T* y) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < n; ++i)
    for (int c = 0; c < d; ++c) y[i * d + c] = s[i] * x[i * d + c];
}

template <typename T>
void shared_gate_forward(Host, const T* s, const T* z, i64 N, int d, T* y) {
#pragma omp parallel for schedule(static)
  for (i64 n = 0; n < N; ++n) {
    const T g = sigmoid(z[n]);
    for (int c = 0; c < d; ++c) y[n * d + c] += g * s[n * d + c];
  }
}

template <typename T>
void shared_gate_backward(Host, const T* s, const T* z, const T* dy, i64 N, int d, T* ds, T* dz) {
#pragma omp parallel for schedule(static)
  for (i64 n = 0; n < N; ++n) {
    const T g = sigmoid(z[n]);
    const double dot =
        row_sum8(d, [&](int c) { return double(dy[n * d + c]) * double(s[n * d + c]); });
    for (int c = 0; c < d; ++c) ds[n * d + c] = g * dy[n * d + c];
    dz[n] = T(dot * double(g) * (1.0 - double(g)));
  }
}

template void router_forward(Host, const float*, std::int64_t, int, int, bool, float*,
                             std::int32_t*, float*);
template void router_forward(Host, const double*, std::int64_t, int, int, bool, double*,
                             std::int32_t*, double*);
template void router_backward(Host, const float*, const std::int32_t*, const float*, std::int64_t,
                              int, int, bool, const double*, float*);
template void router_backward(Host, const double*, const std::int32_t*, const double*, std::int64_t,
                              int, int, bool, const double*, double*);
template void gather_rows(Host, const float*, const std::int64_t*, std::int64_t, int, float*);
template void gather_rows(Host, const double*, const std::int64_t*, std::int64_t, int, double*);
template void scatter_add_rows(Host, const float*, const std::int64_t*, const float*, std::int64_t,
                               int, float*);
template void scatter_add_rows(Host, const double*, const std::int64_t*, const double*,
                               std::int64_t, int, double*);
template void row_dots(Host, const float*, const float*, std::int64_t, int, float*);
template void row_dots(Host, const double*, const double*, std::int64_t, int, double*);
template void scale_rows(Host, const float*, const float*, std::int64_t, int, float*);
template void scale_rows(Host, const double*, const double*, std::int64_t, int, double*);
template void shared_gate_forward(Host, const float*, const float*, std::int64_t, int, float*);
template void shared_gate_forward(Host, const double*, const double*, std::int64_t, int, double*);
template void shared_gate_backward(Host, const float*, const float*, const float*, std::int64_t,
                                   int, float*, float*);
template void shared_gate_backward(Host, const double*, const double*, const double*, std::int64_t,
                                   int, double*, double*);

}  // namespace gdn::ops
