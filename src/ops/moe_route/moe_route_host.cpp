// MoE routing on the host: the counting sort MoeMlp ran inline before (the oracle of the
// GPU version), the per-token combine, and the statistics summed in token order.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/profile.h"
#include "ops/moe_route/moe_route.h"

namespace gdn::ops {

using i64 = std::int64_t;

void moe_route(Host, const std::int32_t* idx, i64 N, int k, int E, i64* offsets, i64* rows,
               i64* choice, i64* slot) {
  const profile::Scope scope("dispatch", profile::Charge::by_region);
  GDN_CHECK(E >= 1 && k >= 1 && N >= 0, "moe_route: ", N, " tokens, top-", k, " of ", E);
  std::fill(offsets, offsets + E + 1, i64(0));
  for (i64 i = 0; i < N * k; ++i) {
    const std::int32_t e = idx[i];
    GDN_CHECK(e >= 0 && e < E, "moe: the router chose expert ", e, " of ", E, " (row ", i / k,
              ")");  // a broken router kernel stops here, not in the offsets
    ++offsets[e + 1];
  }
  for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
  std::vector<i64> fill(offsets, offsets + E);
  for (i64 i = 0; i < N * k; ++i) {
    const i64 at = fill[std::size_t(idx[i])]++;
    rows[at] = i / k;
    choice[at] = i;
    slot[i] = at;
  }
}

template <typename T>
void moe_combine(Host, const T* src, const i64* slot, const T* scale, i64 N, int k, int d, T* y) {
  const profile::Scope scope("dispatch", profile::Charge::by_region);
#pragma omp parallel for schedule(static)
  for (i64 n = 0; n < N; ++n) {
    std::vector<i64> at(slot + n * k, slot + (n + 1) * k);
    std::sort(at.begin(), at.end());
    T* yn = y + n * d;
    for (const i64 s : at) {
      const T w = scale ? scale[s] : T(1);
      for (int c = 0; c < d; ++c) yn[c] += w * src[s * d + c];
    }
  }
}

template <typename T>
void router_stats(Host, const T* probs, const i64* offsets, i64 N, int E, double* stats) {
#pragma omp parallel for schedule(static)
  for (int e = 0; e < E; ++e) {
    stats[e] = double(offsets[e + 1] - offsets[e]);
    double s = 0;
    for (i64 n = 0; n < N; ++n) s += double(probs[n * E + e]);
    stats[E + e] = s;
  }
}

template void moe_combine(Host, const float*, const i64*, const float*, i64, int, int, float*);
template void moe_combine(Host, const double*, const i64*, const double*, i64, int, int, double*);
template void router_stats(Host, const float*, const i64*, i64, int, double*);
template void router_stats(Host, const double*, const i64*, i64, int, double*);

}  // namespace gdn::ops
