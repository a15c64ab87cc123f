#include "plan/memory_fit.h"

namespace gdn::plan {

MemoryEstimate rank_memory(const PlanInput& in, bool recompute) {
  ShardShape s;
  s.B = in.local_batch();
  s.T = in.T;
  s.P = in.cp;
  s.Tl = (in.T + in.cp - 1) / in.cp;
  s.chunk_size = in.chunk_size;
  return estimate_memory(in.model, s, in.elem_bytes, recompute,
                         StateLayout{in.shard, in.world(), in.ep}, in.bf16);
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
      return double(rank_memory(p, in.recompute).total()) <= budget;
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
      f.at = rank_memory(p, in.recompute);
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
            const MemoryEstimate m = rank_memory(p, recompute);
            if (double(m.total()) <= budget) return LayoutFit{W, p.cp, dp, ep, shard, recompute, m};
          }
        }
  }
  return std::nullopt;
}

}  // namespace gdn::plan
