#include "train/token_rows.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "core/error.h"

namespace gdn {

namespace {

class TokenRows final : public TokenSource {
 public:
  TokenRows(Tensor<std::int64_t> rows, std::string name,
            std::optional<std::vector<std::int64_t>> starts)
      : rows_(std::move(rows)), name_(std::move(name)), starts_(std::move(starts)) {
    GDN_CHECK(rows_.shape.size() == 2 && rows_.shape[1] >= 1, name_, ": expected [B, T + 1] rows");
    std::map<std::int64_t, double> count;
    for (std::int64_t id : rows_.data) count[id] += 1;
    for (const auto& [id, n] : count) {
      const double p = n / double(rows_.data.size());
      entropy_ -= p * std::log(p);
    }
  }

  void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                std::int32_t* out) const override {
    (void)step;
    const std::int64_t B = rows_.shape[0], W = rows_.shape[1];
    GDN_CHECK(index >= 0 && index < B && len == W, name_, ": window ", index, " of ", len,
              " tokens asked for; it holds ", B, " rows of ", W);
    const std::int64_t* row = rows_.ptr() + index * W;
    for (std::int64_t t = 0; t < len; ++t) out[t] = std::int32_t(row[t]);
  }
  bool has_documents() const override { return starts_.has_value(); }
  std::vector<std::int64_t> document_starts(std::int64_t, std::int64_t,
                                            std::int64_t) const override {
    return starts_ ? *starts_ : std::vector<std::int64_t>();
  }
  double unigram_entropy() const override { return entropy_; }
  std::string describe() const override {
    return name_ + " (" + std::to_string(rows_.shape[0]) + " rows of " +
           std::to_string(rows_.shape[1]) + " tokens)";
  }

 private:
  Tensor<std::int64_t> rows_;
  std::string name_;
  std::optional<std::vector<std::int64_t>> starts_;
  double entropy_ = 0;
};

}  // namespace

std::shared_ptr<const TokenSource> token_rows(Tensor<std::int64_t> rows, std::string name,
                                              std::optional<std::vector<std::int64_t>> starts) {
  return std::make_shared<TokenRows>(std::move(rows), std::move(name), std::move(starts));
}

}  // namespace gdn
