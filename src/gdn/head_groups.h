// Grouped-query heads: value head h reads key head h / (Hv / Hk). Backward passes write
// dq and dk per value head (no races between threads) and sum each group afterwards.
#pragma once

#include <cstdint>
#include <vector>

namespace gdn {

// per_head holds G blocks of n elements (one per value head of a group, same layout as
// dq); out[x] = sum over the G blocks.
template <typename T>
void sum_head_groups(const T* per_head, std::int64_t n, int G, T* out) {
#pragma omp parallel for schedule(static)
  for (std::int64_t x = 0; x < n; ++x) {
    T acc = 0;
    for (int j = 0; j < G; ++j) acc += per_head[j * n + x];
    out[x] = acc;
  }
}

}  // namespace gdn
