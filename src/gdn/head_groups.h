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

// out[x] += the `blocks` blocks of n elements in per_head, in order: with out holding the
// group's first head, the same sums as sum_head_groups over all G (0 + p0 is p0 exactly).
template <typename T>
void add_head_groups(const T* per_head, std::int64_t n, int blocks, T* out) {
  if (blocks == 0) return;
#pragma omp parallel for schedule(static)
  for (std::int64_t x = 0; x < n; ++x) {
    T acc = out[x];
    for (int j = 0; j < blocks; ++j) acc += per_head[j * n + x];
    out[x] = acc;
  }
}

}  // namespace gdn
