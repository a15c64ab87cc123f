// cudnn_attention.h's host side, built with or without cuDNN: the graph key and the notes.
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
