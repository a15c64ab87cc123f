#include "plan/plan.h"

#include <algorithm>

#include "core/error.h"

namespace gdn::plan {

Plan make_plan(const PlanInput& in, const PlanOptions& opt) {
  Plan p;
  p.in = in;
  const ScanLink link = opt.cluster ? cp_scan_link(in, *opt.cluster) : ScanLink{};
  p.scan = plan_scan(in, opt.memory_budget, link, opt.cluster ? opt.rank_flops_per_s : 0);
  const PairDims d = pair_dims(in.model, in.local_batch());
  p.allgather_cost = scan_cost(PairScan::allgather, in.cp, d, in.elem_bytes);
  p.log_depth_cost = scan_cost(PairScan::log_depth, in.cp, d, in.elem_bytes);
  PlanInput r = in;  // the layout with its scan
  r.pair_scan = p.scan.scan;
  p.flops = count_flops(r);
  p.exchange = predict_exchange(r);
  p.traffic = step_traffic(r);
  p.crossover = crossover(r);
  p.memory_none = rank_memory(r, false);
  p.memory_layer = rank_memory(r, true);
  p.memory = in.recompute ? p.memory_layer : p.memory_none;
  p.memory_budget = opt.memory_budget;
  if (opt.memory_budget) {
    // cp = 1, 2, 4, ... up to at least 8 and the run's cp.
    std::vector<int> cps;
    for (int P = 1; P <= std::max(8, in.cp); P *= 2) cps.push_back(P);
    if (std::find(cps.begin(), cps.end(), in.cp) == cps.end()) cps.push_back(in.cp);
    std::sort(cps.begin(), cps.end());
    p.fits = longest_fits(in, *opt.memory_budget, cps);
    p.smallest = smallest_fit(in, *opt.memory_budget, kMaxWorld);
  }
  if (opt.cluster) {
    GDN_CHECK(opt.rank_flops_per_s > 0,
              "--cluster needs --rank-gflops: the sustained GFLOP/s of one rank (gdn_bench's "
              "\"gflops\", or a figure for the GPU)");
    p.cluster = opt.cluster;
    p.rank_flops_per_s = opt.rank_flops_per_s;
    p.step = predict_step(r, *opt.cluster, opt.rank_flops_per_s);
    p.scaling = cp_scaling(in, *opt.cluster, opt.rank_flops_per_s);
  }
  return p;
}

}  // namespace gdn::plan
