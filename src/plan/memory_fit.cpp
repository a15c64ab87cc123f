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
                         StateLayout{in.shard, in.world(), in.ep});
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

}  // namespace gdn::plan
