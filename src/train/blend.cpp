#include "train/blend.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace gdn {

namespace {

// The weight of item "W:FILE" and its file, or nullopt when the item is not of that form.
std::optional<std::pair<double, std::string>> split_item(const std::string& item) {
  const std::size_t colon = item.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) return std::nullopt;
  double w = 0;
  const char* end = item.data() + colon;
  const auto [ptr, ec] = std::from_chars(item.data(), end, w);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return std::pair{w, item.substr(colon + 1)};
}

std::vector<std::string> items_of(const std::string& data) {
  std::vector<std::string> items;
  std::size_t pos = 0;
  while (pos <= data.size()) {
    const std::size_t end = std::min(data.find(',', pos), data.size());
    items.push_back(data.substr(pos, end - pos));
    pos = end + 1;
  }
  return items;
}

// The choice's stream differs from the windows' offsets (sequence_seed of the plain seed).
constexpr std::uint64_t kChoiceSalt = 0xB1E4DB1E4DB1E4Dull;

class BlendSource final : public TokenSource {
 public:
  BlendSource(std::vector<double> weights, std::vector<std::string> files,
              std::vector<std::unique_ptr<TokenSource>> sources, std::uint64_t seed)
      : weights_(std::move(weights)),
        files_(std::move(files)),
        sources_(std::move(sources)),
        seed_(seed) {}

  void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                std::int32_t* out) const override {
    pick(step, index).sequence(step, index, len, out);
  }
  void window_part(std::int64_t step, std::int64_t index, std::int64_t len, std::int64_t begin,
                   std::int64_t count, std::int32_t* out) const override {
    pick(step, index).window_part(step, index, len, begin, count, out);
  }
  bool has_documents() const override { return sources_.front()->has_documents(); }
  std::vector<std::int64_t> document_starts(std::int64_t step, std::int64_t index,
                                            std::int64_t len) const override {
    return pick(step, index).document_starts(step, index, len);
  }
  // The weighted mean of the sources' entropies: a lower bound of the mixture's.
  double unigram_entropy() const override {
    double h = 0;
    for (std::size_t i = 0; i < sources_.size(); ++i)
      h += share(i) * sources_[i]->unigram_entropy();
    return h;
  }
  std::string describe() const override {
    std::string s = fmt::format("a blend of {}:", sources_.size());
    for (std::size_t i = 0; i < sources_.size(); ++i)
      s += fmt::format("{} {:.1f}% {} ({})", i ? ";" : "", 100 * share(i), files_[i],
                       sources_[i]->describe());
    return s;
  }
  std::int64_t stored_bytes() const override {
    std::int64_t n = 0;
    for (const auto& s : sources_) n += s->stored_bytes();
    return n;
  }
  bool can_count_targets(std::int32_t eos) const override {
    for (std::size_t i = 0; i < sources_.size(); ++i)
      if (weights_[i] > 0 && !sources_[i]->can_count_targets(eos)) return false;
    return true;
  }

 private:
  const TokenSource& pick(std::int64_t step, std::int64_t index) const {
    return *sources_[std::size_t(blend_choice(weights_, seed_, step, index))];
  }
  double share(std::size_t i) const {
    return weights_[i] / std::accumulate(weights_.begin(), weights_.end(), 0.0);
  }

  std::vector<double> weights_;
  std::vector<std::string> files_;
  std::vector<std::unique_ptr<TokenSource>> sources_;
  std::uint64_t seed_;
};

}  // namespace

bool is_blend(const std::string& data) {
  for (const std::string& item : items_of(data))
    if (!split_item(item)) return false;
  return true;
}

int blend_choice(const std::vector<double>& weights, std::uint64_t seed, std::int64_t step,
                 std::int64_t index) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  Rng rng(sequence_seed(seed ^ kChoiceSalt, step, index));
  const double u = rng.uniform() * total;
  double sum = 0;
  int last = 0;  // the last source with weight: where rounding leaves u past every sum
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    sum += weights[i];
    last = int(i);
    if (u < sum) return last;
  }
  return last;
}

std::unique_ptr<TokenSource> make_blend(const std::string& data, int vocab_size, std::uint64_t seed,
                                        std::int64_t seq_len) {
  std::vector<double> weights;
  std::vector<std::string> files;
  std::vector<std::unique_ptr<TokenSource>> sources;
  for (const std::string& item : items_of(data)) {
    const auto [w, file] = *split_item(item);
    GDN_CHECK(std::isfinite(w) && w >= 0, "data blend '", data, "': the weight of '", item, "' is ",
              w, ": expected a number >= 0");
    GDN_CHECK(file != "synthetic" && !is_blend(file), "data blend '", data, "': '", file,
              "' cannot be blended: expected a token, text or Megatron file");
    weights.push_back(w);
    files.push_back(file);
    sources.push_back(make_token_source(file, vocab_size, seed, seq_len));
    GDN_CHECK(sources.back()->has_documents() == sources.front()->has_documents(), "data blend '",
              data, "': '", file, "' ",
              sources.back()->has_documents() ? "records" : "does not record",
              " its documents and '", files.front(), "' ",
              sources.front()->has_documents() ? "does" : "does not",
              ": blend Megatron datasets only with each other");
  }
  GDN_CHECK(std::accumulate(weights.begin(), weights.end(), 0.0) > 0, "data blend '", data,
            "': every weight is 0: expected at least one above 0");
  return std::make_unique<BlendSource>(std::move(weights), std::move(files), std::move(sources),
                                       seed);
}

}  // namespace gdn
