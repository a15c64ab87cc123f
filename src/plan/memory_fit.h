// Per-rank memory of a step, as gdn_train estimates it before it allocates anything
// (model/memory_estimate.h, the largest shard ceil(T / P)), and the longest seq_len that
// fits a memory budget at each cp degree.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/memory_estimate.h"
#include "model/pair_scan_choice.h"
#include "plan/plan_input.h"

namespace gdn::plan {

// The pair scan of in's layout: as asked, or auto resolved as gdn_train resolves it
// (model/pair_scan_choice.h) with `budget` bytes per rank (none: no limit) on `link`.
PairScanChoice plan_scan(const PlanInput& in, std::optional<double> budget = std::nullopt,
                         const ScanLink& link = {}, double flops_per_s = 0);
// in with its pair_scan resolved by plan_scan (the same arguments).
PlanInput resolved(const PlanInput& in, std::optional<double> budget = std::nullopt,
                   const ScanLink& link = {}, double flops_per_s = 0);

// What Trainer's start-up check computes for this layout (auto resolved without a limit).
MemoryEstimate rank_memory(const PlanInput& in, bool recompute);

struct Fit {
  int cp = 1;
  std::int64_t seq_len = 0;             // the longest that fits; 0 when not even seq_len = cp does
  MemoryEstimate at;                    // the estimate there
  PairScan scan = PairScan::allgather;  // there (auto: log_depth where only it fits)
};

// For each cp in `cps`, the longest seq_len whose estimate (with in.recompute) is at
// most `budget` bytes. The estimate grows with seq_len, so a bisection finds it.
std::vector<Fit> longest_fits(const PlanInput& in, double budget, const std::vector<int>& cps);

// A layout of in's model, sequence and batch on `world` ranks whose estimate fits.
struct LayoutFit {
  int world = 0, cp = 1, dp = 1, ep = 1;
  Sharding shard = Sharding::none;
  bool recompute = false;
  PairScan scan = PairScan::allgather;
  MemoryEstimate at;
};

// The fewest ranks, a power of two up to max_world, on which some layout fits `budget`
// bytes per rank: cp x dp = world (dp dividing the batch, cp <= seq_len), ep a power of
// two dividing the world and the experts, any train.shard and recompute, the pair scan as
// asked (auto: log_depth where only it fits the budget). Of the layouts
// that fit there, the one that moves the least besides CP: shard none before optimizer
// before full, then no recomputation, then the smallest ep, then the largest dp. nullopt
// when none fits up to max_world.
std::optional<LayoutFit> smallest_fit(const PlanInput& in, double budget, int max_world);

}  // namespace gdn::plan
