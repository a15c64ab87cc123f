// Which query rows each cp rank's attention computes (cp/attention_cp.h's
// attention_query_ranges: the contiguous shard, or with layer_local balance stripes r and
// 2P-1-r of the sequence cut into 2P), and its share of the causal triangle in closed form.
#pragma once

#include <cstdint>
#include <vector>

#include "cp/shard.h"

namespace gdn::plan {

using Interval = Shard;  // [begin, end) of the sequence

std::int64_t overlap(Interval a, Interval b);

// Rank r's query rows, as one or two intervals (balance applies only at P > 1, as in
// AttentionContextParallel).
std::vector<Interval> query_intervals(std::int64_t T, int P, int r, bool balanced);

// (query, key) pairs per sequence and head of these query rows: sum of (t + 1).
std::int64_t causal_pairs(const std::vector<Interval>& rows);

struct AttentionBalance {
  std::vector<std::int64_t> pairs;  // per cp rank
  std::int64_t max() const;
  double max_over_mean() const;  // 1 when balanced; 2P/(P+1)-ish for contiguous shards
};

AttentionBalance attention_balance(std::int64_t T, int P, bool balanced);

}  // namespace gdn::plan
