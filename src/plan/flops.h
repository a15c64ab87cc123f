// FLOPs of one training step, by component and layer type, per cp rank and in all, from
// the config alone. A multiply-add is 2 FLOPs and the products are counted as the kernels
// compute them (gdn/flop_count.h for the GDN core; the attention kernel's backward makes
// the probabilities twice), so a throughput measured by gdn_bench turns them into time.
// Elementwise work (norms, gates, activations, RoPE) is left out, as in flop_count.h;
// cross-entropy, being per logit, is counted as 4 FLOPs per logit forward and 2 backward.
//
// Per token and layer (d hidden, W conv width, Cc = 2 Hk K + Hv V conv channels):
//   gdn.projections  2 [d (2 Hk K + 2 Hv V) + 2 d Hv + Hv V d]    (qkv, z, b, a, out_proj)
//   gdn.conv         2 W Cc
//   gdn.core         chunk_flops: prepare + output (backward: its own formula)
//   gdn.core.cp_phase1 (P > 1) forward: state (the transition M, U); backward: prepare
//                    again (the factors are not kept for the backward) + adjoint
//   attention.projections 2 [d 2 Hq D + 2 d Hkv D + Hq D d]      (q with its gate, k, v, o)
//   attention.core   4 D Hq per (query, key) pair, backward 14 D Hq
//   moe.router 2 d E; moe.experts 2 k 3 d I; moe.shared_expert 2 (3 d Is + d); mlp.dense 2 3 d I
//   lm_head 2 d vocab; cross_entropy 4 vocab
// Backward of a linear map is twice its forward (dx and dW).
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
