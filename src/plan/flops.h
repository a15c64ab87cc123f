// FLOPs of one training step, by component and layer type, per cp rank and in all, from
// the config alone, counted as the kernels compute them (a multiply-add is 2 FLOPs) so that
// gdn_bench's GFLOP/s turns them into time. Each component's formula: docs/design.md §10.
#pragma once

#include <string>
#include <vector>

#include "plan/attention_balance.h"
#include "plan/plan_input.h"

namespace gdn::plan {

struct Flops {
  double fwd = 0, bwd = 0;
  double total() const { return fwd + bwd; }
  Flops& operator+=(const Flops& o) {
    fwd += o.fwd;
    bwd += o.bwd;
    return *this;
  }
};

struct ComponentFlops {
  std::string name;   // "gdn.projections", ...
  int layers = 0;     // layers that have it (1 for lm_head and cross_entropy)
  Flops step;         // one step, all ranks
  double replay = 0;  // the forward run again with --recompute layer, all ranks
};

struct FlopReport {
  std::vector<ComponentFlops> components;  // in a fixed order, zero ones included
  double tokens = 0;                       // of the global batch
  Flops step;                              // all ranks
  Flops step_cp1;                          // the same step at cp = 1
  double replay = 0;                       // all ranks; 0 without recomputation
  // Per cp rank of one dp group (the dp groups are alike), with the chosen balance:
  // forward + backward, and what recomputation adds.
  std::vector<Flops> rank;
  std::vector<double> rank_replay;
  AttentionBalance contiguous, layer_local;  // both, whichever the run uses
  double relative_increase() const { return step.total() / step_cp1.total() - 1; }
  // The rank with the most work: forward + backward + replay.
  double max_rank_executed() const;
};

FlopReport count_flops(const PlanInput& in);

}  // namespace gdn::plan
