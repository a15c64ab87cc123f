#include "cp/shard.h"

#include <algorithm>

#include "core/error.h"

namespace gdn {

Shard contiguous_shard(std::int64_t T, int P, int r) {
  GDN_CHECK(P >= 1 && r >= 0 && r < P, "rank ", r, " is not in [0, ", P, ")");
  const std::int64_t per = (T + P - 1) / P;
  return {std::min(T, per * r), std::min(T, per * (r + 1))};
}

LoadBalance parse_load_balance(const std::string& s) {
  if (s == "none" || s == "off" || s == "false") return LoadBalance::none;
  if (s == "zigzag" || s == "load_balanced" || s == "true") return LoadBalance::zigzag;
  throw_error("load balance '", s, "' is not known: expected none or zigzag");
}

const char* const kContiguousShardsRequired =
    "GDN context parallelism requires contiguous, in-order shards: the gated delta rule is a "
    "sequential recurrence (each state depends on the one before it), so each rank must own "
    "one contiguous, in-order shard of the sequence and the prefix scan assumes rank order "
    "equals sequence order. A zigzag / load-balanced reorder gives each rank two "
    "non-contiguous parts and would silently compute the wrong result. GDN gains nothing from "
    "it anyway: it has no causal-mask triangle, so its per-rank cost is already uniform. Use "
    "load balance 'none' (context_parallel_load_balance = false).";

void require_contiguous_shards(LoadBalance lb, const std::string& where) {
  if (lb != LoadBalance::none)
    throw_error(kContiguousShardsRequired, " [asked for zigzag by ", where, "]");
}

}  // namespace gdn
