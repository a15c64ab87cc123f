// cudnn_attention.h's host side, built with or without cuDNN: the graph key and the notes.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/attention/cudnn_attention.h"

namespace gdn::ops {

bool cudnn_attention_built() {
#if GDN_HAVE_CUDNN
  return true;
#else
  return false;
#endif
}

bool CudnnAttentionShape::operator<(const CudnnAttentionShape& o) const {
  auto key = [](const CudnnAttentionShape& s) {
    return std::tie(s.backward, s.B, s.Hq, s.Hkv, s.D, s.scale, s.segments, s.Tq, s.Tk);
  };
  return key(*this) < key(o);
}

CudnnAttentionShape cudnn_attention_shape(bool backward, int B, std::int64_t Tq, std::int64_t Tk,
                                          int Hq, int Hkv, int D, double scale, std::size_t n) {
  GDN_CHECK(n >= 1, "cudnn attention: a call with no segments");
  std::int64_t cap = 1;
  while (cap < std::int64_t(n)) cap *= 2;
  return {backward, Hq, Hkv, D, float(scale), cap, Tq, Tk, B};
}

namespace {

std::int32_t as_int(std::int64_t x, const char* what) {
  GDN_CHECK(x >= 0 && x <= INT_MAX, "cudnn attention: ", what, " ", x,
            " does not fit cuDNN's int32 index tensors");
  return std::int32_t(x);
}

}  // namespace

CudnnAttentionTables cudnn_attention_tables(const std::vector<AttentionSegment>& wave,
                                            std::int64_t cap, std::int64_t Tq, std::int64_t Tk,
                                            int Hq, int Hkv, int D) {
  GDN_CHECK(cap >= std::int64_t(wave.size()), "cudnn attention: ", wave.size(),
            " segments for a graph of ", cap);
  CudnnAttentionTables t;
  t.seq_q.assign(std::size_t(cap), 0);
  t.seq_kv.assign(std::size_t(cap), 0);
  t.off_q.assign(std::size_t(cap) + 1, 0);
  t.off_kv = t.off_stats = t.off_q;
  std::int64_t end_q = 0, end_kv = 0;  // past the last segment: where the empty ones start
  for (std::size_t x = 0; x < wave.size(); ++x) {
    const AttentionSegment& s = wave[x];
    const std::int64_t qrow = std::int64_t(s.b) * Tq + s.q_begin;
    const std::int64_t krow = std::int64_t(s.b) * Tk + s.kv_begin;
    t.seq_q[x] = as_int(s.q_len, "query rows");
    t.seq_kv[x] = as_int(s.kv_len, "key rows");
    t.off_q[x] = as_int(qrow * Hq * D, "query offset");
    t.off_kv[x] = as_int(krow * Hkv * D, "key offset");
    t.off_stats[x] = as_int(qrow * Hq, "statistics offset");
    // In the order of the rows, none overlapping the one before, as packed (THD) sequences
    // with padding between them lie: a wave's segments are (attention_segments.h).
    GDN_CHECK(qrow >= end_q && krow >= end_kv, "cudnn attention: segment ", x,
              " of a wave starts before the one before it ends (rows ", qrow, ", ", krow,
              " against ", end_q, ", ", end_kv, ")");
    end_q = qrow + s.q_len;
    end_kv = krow + s.kv_len;
  }
  for (std::size_t x = wave.size(); x <= std::size_t(cap); ++x) {
    t.off_q[x] = as_int(end_q * Hq * D, "query offset");
    t.off_kv[x] = as_int(end_kv * Hkv * D, "key offset");
    t.off_stats[x] = as_int(end_q * Hq, "statistics offset");
  }
  return t;
}

namespace {
std::mutex notes_mutex;
std::set<CudnnAttentionShape> noted;
std::vector<std::string> pending;
}  // namespace

void note_cudnn_attention_refusal(const CudnnAttentionShape& s, const std::string& why) {
  const std::lock_guard<std::mutex> lock(notes_mutex);
  if (!noted.insert(s).second) return;
  std::ostringstream line;
  line << (s.backward ? "backward" : "forward") << ", " << s.Hq << " / " << s.Hkv << " heads, D "
       << s.D << ", " << s.segments << " segments of <= " << s.Tq << " queries over <= " << s.Tk
       << " keys: " << why;
  pending.push_back(line.str());
}

std::vector<std::string> take_cudnn_attention_notes() {
  const std::lock_guard<std::mutex> lock(notes_mutex);
  return std::exchange(pending, {});
}

}  // namespace gdn::ops
