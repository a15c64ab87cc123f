#include "plan/step_time.h"

#include <algorithm>

#include "core/error.h"
#include "plan/flops.h"

namespace gdn::plan {

StepTime predict_step(const PlanInput& asked, const ClusterSpec& c, double flops_per_s) {
  const PlanInput in = resolved(asked, std::nullopt, cp_scan_link(asked, c), flops_per_s);
  GDN_CHECK(in.world() <= c.ranks(), "dp ", in.dp, " x cp ", in.cp, " = ", in.world(),
            " ranks, but the cluster has nodes x gpus = ", c.nodes, " x ", c.gpus, " = ", c.ranks(),
            " GPUs");
  GDN_CHECK(flops_per_s > 0, "the per-rank throughput must be > 0");
  StepTime s;
  s.cp = in.cp;
  s.scan = in.pair_scan;
  // The kernels' FLOPs, and the pair scan's folding or composing (design §3c) in every GDN
  // layer on the busiest rank.
  const int gdn = in.model.num_hidden_layers - in.model.num_attention_layers();
  const ScanCost scan =
      scan_cost(in.pair_scan, in.cp, pair_dims(in.model, in.local_batch()), in.elem_bytes);
  s.compute_s = (count_flops(in).max_rank_executed() + gdn * scan.flops) / flops_per_s;
  const Link cp_link = group_link(c, in.cp, in.dp), world_link = group_link(c, in.world(), 1);
  s.cp_on_network = cp_link.network && in.cp > 1;
  s.world_on_network = world_link.network && in.world() > 1;
  for (const SiteTraffic& t : step_traffic(in)) {
    const int n = t.world ? in.world() : in.cp;
    const double secs =
        double(t.calls) * collective_seconds(t.kind, n, t.bytes, t.world ? world_link : cp_link);
    s.site_s[t.site] += secs;
    s.comm_s += secs;
  }
  return s;
}

std::vector<StepTime> cp_scaling(const PlanInput& in, const ClusterSpec& c, double flops_per_s) {
  std::vector<int> cps;
  for (int P = 1; std::int64_t(P) * in.dp <= c.ranks() && P <= in.T; P *= 2) cps.push_back(P);
  if (std::find(cps.begin(), cps.end(), in.cp) == cps.end() && in.world() <= c.ranks())
    cps.push_back(in.cp);
  std::sort(cps.begin(), cps.end());
  std::vector<StepTime> out;
  for (int P : cps) out.push_back(predict_step(in.at_cp(P), c, flops_per_s));
  return out;
}

}  // namespace gdn::plan
