#include "ops/attention/attention_segments.h"

#include <algorithm>

#include "core/error.h"

namespace gdn::ops {

using i64 = std::int64_t;

std::size_t AttentionSegments::count() const {
  std::size_t n = 0;
  for (const std::vector<AttentionSegment>& w : waves) n += w.size();
  return n;
}

i64 AttentionSegments::max_q_len() const {
  i64 m = 0;
  for (const std::vector<AttentionSegment>& w : waves)
    for (const AttentionSegment& s : w) m = std::max(m, s.q_len);
  return m;
}

i64 AttentionSegments::max_kv_len() const {
  i64 m = 0;
  for (const std::vector<AttentionSegment>& w : waves)
    for (const AttentionSegment& s : w) m = std::max(m, s.kv_len);
  return m;
}

namespace {

bool share_a_key(const AttentionSegment& x, const AttentionSegment& y) {
  return x.b == y.b && x.kv_begin < y.kv_begin + y.kv_len && y.kv_begin < x.kv_begin + x.kv_len;
}

// Into the first wave where it shares no key with a segment already there.
void place(AttentionSegments& out, const AttentionSegment& s) {
  for (std::vector<AttentionSegment>& w : out.waves)
    if (std::none_of(w.begin(), w.end(),
                     [&](const AttentionSegment& t) { return share_a_key(s, t); })) {
      w.push_back(s);
      return;
    }
  out.waves.push_back({s});
}

}  // namespace

AttentionSegments attention_segments(const i64* qpos, const i64* kstart, int B, i64 Tq) {
  GDN_CHECK(B >= 0 && Tq >= 0, "attention_segments: ", B, " rows of ", Tq, " queries");
  AttentionSegments out;
  for (int b = 0; b < B; ++b) {
    const i64* ks = kstart ? kstart + i64(b) * Tq : nullptr;
    for (i64 i = 0; i < Tq;) {
      const i64 first = ks ? ks[i] : 0;
      i64 j = i + 1;  // the segment's rows: consecutive positions, the same first key
      while (j < Tq && qpos[j] == qpos[j - 1] + 1 && (ks ? ks[j] : 0) == first) ++j;
      GDN_CHECK(first <= qpos[i], "attention_segments: row ", i, " of batch row ", b,
                " sees no key (first key ", first, ", position ", qpos[i], ")");
      place(out, {b, i, j - i, first, qpos[j - 1] + 1 - first});
      i = j;
    }
  }
  return out;
}

}  // namespace gdn::ops
