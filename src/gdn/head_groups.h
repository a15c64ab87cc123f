// Grouped-query heads: value head h reads key head h / (Hv / Hk). Backward passes write
// dq and dk per value head (no races between threads) and sum each group afterwards.
#pragma once

#include <cstdint>
#include <vector>

#include "core/bf16.h"
#include "core/hd.h"
#include "ops/l2norm/l2norm.h"

namespace gdn {

// per_head holds G blocks of n elements (one per value head of a group, same layout as
// dq); out[x] = sum over the G blocks.
template <typename T>
void sum_head_groups(const T* per_head, std::int64_t n, int G, T* out) {
#ifdef _OPENMP  // nvcc includes this header without OpenMP (backward_cuda.cu)
#pragma omp parallel for schedule(static)
#endif
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
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (std::int64_t x = 0; x < n; ++x) {
    T acc = out[x];
    for (int j = 0; j < blocks; ++j) acc += per_head[j * n + x];
    out[x] = acc;
  }
}

// Row r (dim elements) of sum_head_groups, then the l2norm's backward of it in place from
// the bf16 input row x (the bf16 op's q or k, which its kernels normalise as they read
// them): the bits of sum_head_groups and l2norm_rows_backward on the widened x, one row.
// The CUDA pass runs it a row per thread (gdn/backward/backward_cuda.cu).
template <typename T>
GDN_HD void sum_head_group_row_l2norm(const T* per_head, std::int64_t n, std::int64_t r, int dim,
                                      int G, const Bf16* x, T* out) {
  T* o = out + r * dim;
  for (int d = 0; d < dim; ++d) {
    T acc = 0;
    for (int j = 0; j < G; ++j) acc += per_head[j * n + r * dim + d];
    o[d] = acc;
  }
  l2norm_row_backward(Bf16Row{x + r * dim}, o, dim, o);
}

}  // namespace gdn
