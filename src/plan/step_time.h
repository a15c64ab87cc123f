// The predicted step time on a cluster: the busiest rank's FLOPs (forward, backward and
// the replayed forward when recomputing; the pair scan's folding) at a sustained rate, plus every
// call site's collectives at their alpha-beta cost (cluster.h), one after the other. Also the same
// step over a range of cp degrees at the same dp, so a user sees where cp stops paying.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "plan/cluster.h"
#include "plan/memory_fit.h"
#include "plan/plan_input.h"

namespace gdn::plan {

struct StepTime {
  int cp = 1;
  PairScan scan = PairScan::allgather;  // auto resolved on the cp group's link
  double compute_s = 0, comm_s = 0;
  std::map<std::string, double> site_s;  // per call site, all calls of the step
  bool cp_on_network = false, world_on_network = false;
  double total_s() const { return compute_s + comm_s; }
};

// flops_per_s: one rank's sustained FLOP/s (gdn_bench's GFLOP/s x 1e9, or a given figure).
// pair_scan auto is resolved on the cp group's link (memory_fit.h: plan_scan).
StepTime predict_step(const PlanInput& in, const ClusterSpec& c, double flops_per_s);

// cp = 1, 2, 4, ... (and in.cp) while dp x cp fits the cluster and cp <= seq_len.
std::vector<StepTime> cp_scaling(const PlanInput& in, const ClusterSpec& c, double flops_per_s);

}  // namespace gdn::plan
