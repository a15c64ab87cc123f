// Per-rank memory of a step, as gdn_train estimates it before it allocates anything
// (model/memory_estimate.h, the largest shard ceil(T / P)), and the longest seq_len that
// fits a memory budget at each cp degree.
#pragma once

#include <cstdint>
#include <optional>
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

// A layout of in's model, sequence and batch on `world` ranks whose estimate fits.
struct LayoutFit {
  int world = 0, cp = 1, dp = 1, ep = 1;
  Sharding shard = Sharding::none;
  bool recompute = false;
  MemoryEstimate at;
};

// The fewest ranks, a power of two up to max_world, on which some layout fits `budget`
// bytes per rank: cp x dp = world (dp dividing the batch, cp <= seq_len), ep a power of
// two dividing the world and the experts, any train.shard and recompute. Of the layouts
// that fit there, the one that moves the least besides CP: shard none before optimizer
// before full, then no recomputation, then the smallest ep, then the largest dp. nullopt
// when none fits up to max_world.
std::optional<LayoutFit> smallest_fit(const PlanInput& in, double budget, int max_world);

}  // namespace gdn::plan
