#include "plan/memory_fit.h"

#include <algorithm>
#include <cmath>

namespace gdn::plan {

namespace {

EstimateInputs estimate_inputs(const PlanInput& in, bool recompute, PairScan scan) {
  return {in.model,
          ShardShape::largest(in.micro_batch(), in.T, in.cp, in.chunk_size, scan),
          in.elem_bytes,
          recompute,
          StateLayout{in.shard, in.world(), in.ep},
          in.bf16};
}

}  // namespace

PairScanChoice plan_scan(const PlanInput& in, std::optional<double> budget, const ScanLink& link,
                         double flops_per_s) {
  // A budget past 2^62 bytes is no limit.
  const std::int64_t available =
      budget ? std::int64_t(std::min(*budget, std::ldexp(1.0, 62))) : std::int64_t(-1);
  return resolve_pair_scan(in.pair_scan, estimate_inputs(in, in.recompute, PairScan::allgather),
                           available, link, flops_per_s);
}

PlanInput resolved(const PlanInput& in, std::optional<double> budget, const ScanLink& link,
                   double flops_per_s) {
  PlanInput p = in;
  p.pair_scan = plan_scan(in, budget, link, flops_per_s).scan;
  return p;
}

MemoryEstimate rank_memory(const PlanInput& in, bool recompute) {
  const EstimateInputs e = estimate_inputs(in, recompute, plan_scan(in).scan);
  return estimate_memory(e.model, e.shape, e.elem_bytes, recompute, e.state, e.bf16);
}

std::vector<Fit> longest_fits(const PlanInput& in, double budget, const std::vector<int>& cps) {
  std::vector<Fit> out;
  // 2^36 tokens per sequence is far past any budget; the cap keeps the products in range.
  const std::int64_t cap = std::int64_t(1) << 36;
  for (int P : cps) {
    PlanInput p = in;
    p.cp = P;
    auto fits = [&](std::int64_t T) {
      p.T = T;
      return double(rank_memory(resolved(p, budget), in.recompute).total()) <= budget;
    };
    Fit f;
    f.cp = P;
    if (fits(P)) {
      std::int64_t lo = P, hi = 2 * std::int64_t(P);  // fits(lo); find hi that does not
      while (hi < cap && fits(hi)) lo = hi, hi *= 2;
      if (hi >= cap && fits(cap)) lo = hi = cap;
      while (hi - lo > 1) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
      }
      f.seq_len = lo;
      p.T = lo;
      const PlanInput r = resolved(p, budget);
      f.at = rank_memory(r, in.recompute);
      f.scan = r.pair_scan;
    }
    out.push_back(f);
  }
  return out;
}

std::optional<LayoutFit> smallest_fit(const PlanInput& in, double budget, int max_world) {
  const int E = in.model.num_moe_layers() > 0 ? in.model.num_experts : 1;
  for (int W = 1; W <= max_world; W *= 2) {
    // Preference order: shard, recompute, ep, then dp from the largest.
    for (Sharding shard : {Sharding::none, Sharding::optimizer, Sharding::full})
      for (bool recompute : {false, true})
        for (int ep = 1; ep <= W; ep *= 2) {
          if (W % ep != 0 || E % ep != 0) continue;
          for (int dp = std::min(W, in.batch); dp >= 1; --dp) {
            if (W % dp != 0 || in.batch % dp != 0 || W / dp > in.T) continue;
            PlanInput p = in;
            p.cp = W / dp, p.dp = dp, p.ep = ep, p.shard = shard, p.recompute = recompute;
            const PlanInput r = resolved(p, budget);
            const MemoryEstimate m = rank_memory(r, recompute);
            if (double(m.total()) <= budget)
              return LayoutFit{W, p.cp, dp, ep, shard, recompute, r.pair_scan, m};
          }
        }
  }
  return std::nullopt;
}

}  // namespace gdn::plan
