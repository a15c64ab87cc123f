// Per-rank memory of a step, as gdn_train estimates it before it allocates anything
// (model/memory_estimate.h, the largest shard ceil(T / P)), and the longest seq_len that
// fits a memory budget at each cp degree.
#pragma once

#include <cstdint>
#include <vector>

#include "model/memory_estimate.h"
#include "plan/plan_input.h"

namespace gdn::plan {

// What Trainer's start-up check computes for this layout.
MemoryEstimate rank_memory(const PlanInput& in, bool recompute);

struct Fit {
  int cp = 1;
  std::int64_t seq_len = 0;  // the longest that fits; 0 when not even seq_len = cp does
  MemoryEstimate at;         // the estimate there
};

// For each cp in `cps`, the longest seq_len whose estimate (with in.recompute) is at
// most `budget` bytes. The estimate grows with seq_len, so a bisection finds it.
std::vector<Fit> longest_fits(const PlanInput& in, double budget, const std::vector<int>& cps);

}  // namespace gdn::plan
