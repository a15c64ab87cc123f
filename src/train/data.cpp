#include "train/data.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"

namespace gdn {
namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The seed of one sequence: a hash of (seed, step, index), so any rank can draw any
// sequence without drawing the ones before it.
std::uint64_t sequence_seed(std::uint64_t seed, std::int64_t step, std::int64_t index) {
  std::uint64_t h = splitmix(seed ^ 0x5EEDDA7A00000000ull);
  h = splitmix(h ^ splitmix(std::uint64_t(step) + 0x1111111111111111ull));
  h = splitmix(h ^ splitmix(std::uint64_t(index) + 0x2222222222222222ull));
  return h;
}

template <typename Probs>
double entropy_nats(const Probs& p) {
  double h = 0;
  for (const double x : p)
    if (x > 0) h -= x * std::log(x);
  return h;
}

// A random Markov chain: from each token, with probability 1 - kNoise the next token is
// one of kSucc fixed successors (Dirichlet(1) weights), otherwise uniform. The noise keeps
// the chain ergodic; the successors give the model something to learn: the entropy rate
// is far below log(vocab).
class SyntheticSource final : public TokenSource {
 public:
  static constexpr int kSucc = 4;
  static constexpr double kNoise = 0.05;

  SyntheticSource(int vocab, std::uint64_t seed)
      : vocab_(vocab),
        seed_(seed),
        succ_(std::size_t(vocab) * kSucc),
        cum_(std::size_t(vocab) * kSucc) {
    GDN_CHECK(vocab >= 2, "synthetic data needs vocab_size >= 2, got ", vocab);
    Rng rng(splitmix(seed ^ 0xC4A1C4A1C4A1C4A1ull));
    double rate = 0;  // mean over tokens of the successor entropy, for describe()
    for (int t = 0; t < vocab; ++t) {
      std::array<double, kSucc> w{};
      double sum = 0;
      for (int s = 0; s < kSucc; ++s) {
        // Distinct successors when the vocabulary allows it.
        std::int32_t next;
        do {
          next = std::int32_t(rng.next_u64() % std::uint64_t(vocab));
        } while (vocab >= kSucc && contains(t, s, next));
        succ_[idx(t, s)] = next;
        w[s] = -std::log(1.0 - rng.uniform());
        sum += w[s];
      }
      double acc = 0;
      std::array<double, kSucc + 1> p{};
      for (int s = 0; s < kSucc; ++s) {
        p[s] = (1.0 - kNoise) * w[s] / sum;
        acc += p[s];
        cum_[idx(t, s)] = acc;
      }
      p[kSucc] = kNoise;  // spread over vocab: adds kNoise * log(vocab) - kNoise log kNoise
      rate += entropy_nats(p) + kNoise * std::log(double(vocab));
    }
    entropy_rate_ = rate / vocab;
    unigram_entropy_ = entropy_nats(stationary());
  }

  void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                std::int32_t* out) const override {
    if (len <= 0) return;
    Rng rng(sequence_seed(seed_, step, index));
    std::int32_t t = std::int32_t(rng.next_u64() % std::uint64_t(vocab_));
    out[0] = t;
    for (std::int64_t i = 1; i < len; ++i) {
      const double u = rng.uniform();
      std::int32_t next = -1;
      for (int s = 0; s < kSucc && next < 0; ++s)
        if (u < cum_[idx(t, s)]) next = succ_[idx(t, s)];
      if (next < 0) next = std::int32_t(rng.next_u64() % std::uint64_t(vocab_));
      out[i] = t = next;
    }
  }

  double unigram_entropy() const override { return unigram_entropy_; }

  std::string describe() const override {
    std::ostringstream os;
    os << "synthetic Markov chain (vocab " << vocab_ << ", " << kSucc
       << " likely successors per token, seed " << seed_ << "): unigram entropy "
       << unigram_entropy_ << " nats, entropy rate " << entropy_rate_ << " nats";
    return os.str();
  }

 private:
  std::size_t idx(int t, int s) const { return std::size_t(t) * kSucc + s; }
  bool contains(int t, int n, std::int32_t x) const {
    for (int s = 0; s < n; ++s)
      if (succ_[idx(t, s)] == x) return true;
    return false;
  }

  // Power iteration from the uniform distribution; the uniform noise makes the chain
  // mix geometrically (factor <= 1 - kNoise per step), so a few hundred steps suffice.
  std::vector<double> stationary() const {
    std::vector<double> pi(vocab_, 1.0 / vocab_), next(vocab_);
    for (int it = 0; it < 1000; ++it) {
      std::fill(next.begin(), next.end(), kNoise / vocab_);
      for (int t = 0; t < vocab_; ++t) {
        double prev = 0;
        for (int s = 0; s < kSucc; ++s) {
          next[succ_[idx(t, s)]] += pi[t] * (cum_[idx(t, s)] - prev);
          prev = cum_[idx(t, s)];
        }
      }
      double diff = 0;
      for (int t = 0; t < vocab_; ++t) diff += std::abs(next[t] - pi[t]);
      pi.swap(next);
      if (diff < 1e-13) break;
    }
    return pi;
  }

  int vocab_;
  std::uint64_t seed_;
  std::vector<std::int32_t> succ_;  // [vocab, kSucc]
  std::vector<double> cum_;         // cumulative successor probabilities, [vocab, kSucc]
  double entropy_rate_ = 0, unigram_entropy_ = 0;
};

// Byte-level tokens from a text file; each sequence is a window at a seeded offset.
class TextFileSource final : public TokenSource {
 public:
  TextFileSource(const std::string& path, int vocab, std::uint64_t seed, std::int64_t seq_len)
      : path_(path), seed_(seed) {
    GDN_CHECK(vocab >= 256, "data file '", path, "' gives byte-level tokens, which needs ",
              "model.vocab_size >= 256, got vocab_size = ", vocab);
    std::error_code ec;
    GDN_CHECK(!std::filesystem::is_directory(path, ec), "data file '", path,
              "' is a directory: expected a text file (train.data is \"synthetic\" or the path "
              "of a text file)");
    std::ifstream in(path, std::ios::binary);
    GDN_CHECK(in.good(), "cannot open data file '", path, "': ", std::strerror(errno),
              " (train.data is \"synthetic\" or the path of a text file)");
    bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    GDN_CHECK(!in.bad(), "error reading data file '", path, "'");
    check_length(seq_len + 1);
    std::array<double, 256> count{};
    for (const unsigned char b : bytes_) count[b] += 1;
    for (double& c : count) c /= double(bytes_.size());
    unigram_entropy_ = entropy_nats(count);
  }

  void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                std::int32_t* out) const override {
    if (len <= 0) return;
    check_length(len);
    Rng rng(sequence_seed(seed_, step, index));
    const std::uint64_t positions = std::uint64_t(bytes_.size()) - std::uint64_t(len) + 1;
    const std::size_t offset = std::size_t(rng.next_u64() % positions);
    for (std::int64_t i = 0; i < len; ++i)
      out[i] = std::int32_t(static_cast<unsigned char>(bytes_[offset + std::size_t(i)]));
  }

  double unigram_entropy() const override { return unigram_entropy_; }

  std::string describe() const override {
    std::ostringstream os;
    os << "text file " << path_ << " (" << bytes_.size()
       << " bytes, byte-level tokens): unigram entropy " << unigram_entropy_ << " nats";
    return os.str();
  }

 private:
  void check_length(std::int64_t len) const {
    GDN_CHECK(std::int64_t(bytes_.size()) >= len, "data file '", path_, "' has ", bytes_.size(),
              " bytes, but a sequence needs ", len, " (seq_len + 1 for the next-token targets)");
  }

  std::string path_;
  std::uint64_t seed_;
  std::vector<char> bytes_;
  double unigram_entropy_ = 0;
};

}  // namespace

std::unique_ptr<TokenSource> make_token_source(const std::string& data, int vocab_size,
                                               std::uint64_t seed, std::int64_t seq_len) {
  GDN_CHECK(seq_len >= 1, "seq_len ", seq_len, " for the data source: expected >= 1");
  if (data == "synthetic") return std::make_unique<SyntheticSource>(vocab_size, seed);
  return std::make_unique<TextFileSource>(data, vocab_size, seed, seq_len);
}

}  // namespace gdn
