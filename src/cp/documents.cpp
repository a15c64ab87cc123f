#include "cp/documents.h"

#include <algorithm>

#include "core/error.h"

namespace gdn {

Documents::Documents(std::vector<std::vector<std::int64_t>> cu, std::int64_t T)
    : cu_(std::move(cu)), T_(T) {
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

Documents Documents::after_token(const std::int32_t* tokens, int B, std::int64_t T,
                                 std::int32_t eos) {
  std::vector<std::vector<std::int64_t>> cu(std::size_t(B), std::vector<std::int64_t>{0});
  for (int b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t + 1 < T; ++t)
      if (tokens[std::int64_t(b) * T + t] == eos) cu[std::size_t(b)].push_back(t + 1);
    cu[std::size_t(b)].push_back(T);
  }
  return Documents(std::move(cu), T);
}

Documents Documents::slice(int first, int count) const {
  GDN_CHECK(first >= 0 && count >= 0 && first + count <= rows(), "documents: rows [", first, ", ",
            first + count, ") of ", rows());
  return Documents({cu_.begin() + first, cu_.begin() + first + count}, T_);
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
