#include "cp/documents.h"

#include <algorithm>

#include "core/error.h"
#include "ops/cross_entropy/cross_entropy.h"

namespace gdn {

Documents::Documents(std::vector<std::vector<std::int64_t>> cu, std::int64_t T)
    : cu_(std::move(cu)), ends_window_(cu_.size(), 0), T_(T) {
  for (std::size_t b = 0; b < cu_.size(); ++b) {
    const std::vector<std::int64_t>& c = cu_[b];
    GDN_CHECK(c.size() >= 2 && c.front() == 0 && c.back() == T, "documents of row ", b,
              ": the boundaries must run from 0 to the window's ", T, " tokens, got ", c.size(),
              " boundaries from ", c.empty() ? -1 : c.front(), " to ", c.empty() ? -1 : c.back());
    for (std::size_t i = 1; i < c.size(); ++i)
      GDN_CHECK(c[i] > c[i - 1], "documents of row ", b, ": boundary ", i, " = ", c[i],
                " does not follow boundary ", i - 1, " = ", c[i - 1],
                " (expected increasing positions: no empty documents)");
  }
}

Documents Documents::whole(int B, std::int64_t T) {
  return Documents(std::vector<std::vector<std::int64_t>>(std::size_t(B), {0, T}), T);
}

Documents Documents::from_starts(const std::vector<std::vector<std::int64_t>>& starts,
                                 std::int64_t T) {
  std::vector<std::vector<std::int64_t>> cu;
  std::vector<char> ends(starts.size(), 0);
  for (std::size_t b = 0; b < starts.size(); ++b) {
    std::vector<std::int64_t> c{0};
    for (std::int64_t p : starts[b]) {
      GDN_CHECK(p > c.back() && p <= T && !ends[b], "documents of row ", b,
                ": a document starts at ", p, ", expected ascending positions in (0, ", T,
                "] after ", c.back());
      if (p < T) c.push_back(p);
      ends[b] = p == T;
    }
    c.push_back(T);
    cu.push_back(std::move(c));
  }
  Documents d(std::move(cu), T);
  d.ends_window_ = std::move(ends);
  return d;
}

std::vector<std::int64_t> Documents::starts_after(const std::int32_t* inputs, std::int64_t T,
                                                  std::int32_t eos) {
  std::vector<std::int64_t> out;
  for (std::int64_t t = 0; t < T; ++t)
    if (inputs[t] == eos) out.push_back(t + 1);
  return out;
}

void Documents::mask_targets(const Shard& s, std::int32_t* targets) const {
  auto ignore = [&](int b, std::int64_t t) {
    if (t >= s.begin && t < s.end)
      targets[std::int64_t(b) * s.size() + t - s.begin] = ops::kIgnoreTarget;
  };
  for (int b = 0; b < rows(); ++b) {
    const std::vector<std::int64_t>& c = cu_[std::size_t(b)];
    for (std::size_t i = 1; i + 1 < c.size(); ++i) ignore(b, c[i] - 1);
    if (ends_window_[std::size_t(b)]) ignore(b, T_ - 1);
  }
}

std::int64_t Documents::ignored_targets() const {
  std::int64_t n = 0;
  for (std::size_t b = 0; b < cu_.size(); ++b)
    n += std::int64_t(cu_[b].size()) - 2 + (ends_window_[b] ? 1 : 0);
  return n;
}

Documents Documents::slice(int first, int count) const {
  GDN_CHECK(first >= 0 && count >= 0 && first + count <= rows(), "documents: rows [", first, ", ",
            first + count, ") of ", rows());
  Documents d({cu_.begin() + first, cu_.begin() + first + count}, T_);
  d.ends_window_.assign(ends_window_.begin() + first, ends_window_.begin() + first + count);
  return d;
}

std::int64_t Documents::start_of(int b, std::int64_t t) const {
  const std::vector<std::int64_t>& c = cu_[std::size_t(b)];
  return *(std::upper_bound(c.begin(), c.end(), t) - 1);
}

std::vector<std::int64_t> Documents::positions(const Shard& s) const {
  std::vector<std::int64_t> pos;
  pos.reserve(cu_.size() * std::size_t(s.size()));
  for (int b = 0; b < rows(); ++b)
    for (std::int64_t t = s.begin; t < s.end; ++t) pos.push_back(t - start_of(b, t));
  return pos;
}

std::vector<std::int64_t> Documents::starts(const std::vector<std::int64_t>& qpos) const {
  std::vector<std::int64_t> out;
  out.reserve(cu_.size() * qpos.size());
  for (int b = 0; b < rows(); ++b)
    for (std::int64_t t : qpos) out.push_back(start_of(b, t));
  return out;
}

Documents::Summary Documents::summary() const {
  Summary s;
  for (const std::vector<std::int64_t>& c : cu_)
    for (std::size_t i = 1; i < c.size(); ++i) {
      ++s.documents;
      s.longest = std::max(s.longest, c[i] - c[i - 1]);
    }
  if (s.documents > 0) s.mean_length = double(T_) * double(cu_.size()) / double(s.documents);
  return s;
}

}  // namespace gdn
