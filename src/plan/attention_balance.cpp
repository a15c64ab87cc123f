#include "plan/attention_balance.h"

#include <algorithm>

#include "cp/attention_cp.h"

namespace gdn::plan {

std::int64_t overlap(Interval a, Interval b) {
  return std::max<std::int64_t>(0, std::min(a.end, b.end) - std::max(a.begin, b.begin));
}

std::vector<Interval> query_intervals(std::int64_t T, int P, int r, bool balanced) {
  return attention_query_ranges(T, P, r, balanced && P > 1);
}

std::int64_t causal_pairs(const std::vector<Interval>& rows) {
  std::int64_t n = 0;
  for (const Interval& i : rows) n += (i.end * (i.end + 1) - i.begin * (i.begin + 1)) / 2;
  return n;
}

std::int64_t AttentionBalance::max() const {
  return pairs.empty() ? 0 : *std::max_element(pairs.begin(), pairs.end());
}

double AttentionBalance::max_over_mean() const {
  std::int64_t sum = 0;
  for (std::int64_t p : pairs) sum += p;
  return sum == 0 ? 1.0 : double(max()) * double(pairs.size()) / double(sum);
}

AttentionBalance attention_balance(std::int64_t T, int P, bool balanced) {
  AttentionBalance b;
  for (int r = 0; r < P; ++r) b.pairs.push_back(causal_pairs(query_intervals(T, P, r, balanced)));
  return b;
}

}  // namespace gdn::plan
