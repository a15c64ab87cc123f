#include "train/data.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/npy.h"
#include "core/positional_file.h"
#include "core/rng.h"
#include "cp/documents.h"
#include "train/blend.h"
#include "train/megatron_index.h"

namespace gdn {

// Token ids are taken as their bytes lie in the file: the host must be little-endian like
// the formats.
static_assert(std::endian::native == std::endian::little, "gdn-cp assumes a little-endian host");

namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The offset of sequence (step, index)'s window of len tokens in a stream of n >= len:
// uniform in [0, n - len]. Shared by the file sources, so a token file holding a text's
// bytes gives exactly that text's windows.
std::int64_t window_offset(std::uint64_t seed, std::int64_t step, std::int64_t index,
                           std::int64_t n, std::int64_t len) {
  Rng rng(sequence_seed(seed, step, index));
  const std::uint64_t positions = std::uint64_t(n) - std::uint64_t(len) + 1;
  return std::int64_t(rng.next_u64() % positions);
}

// stream_part's contract: [first, first + count) inside a stream of n tokens.
void check_stream_part(std::int64_t first, std::int64_t count, std::int64_t n) {
  GDN_CHECK(first >= 0 && count >= 0 && first <= n - count, "stream_part: tokens [", first, ", ",
            first + count, ") are not inside the data's ", n, " tokens");
}

// window_part's contract: [begin, begin + count) inside a window of len tokens.
void check_slice(std::int64_t len, std::int64_t begin, std::int64_t count) {
  GDN_CHECK(begin >= 0 && count >= 0 && begin <= len - count, "window_part: tokens [", begin, ", ",
            begin + count, ") are not inside a window of ", len, " tokens");
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
// The built-in sources produce any part of a window directly; a whole window is the part
// [0, len).
class PartSource : public TokenSource {
 public:
  void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                std::int32_t* out) const final {
    window_part(step, index, len, 0, len, out);
  }
};

class SyntheticSource final : public PartSource {
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

  // Each token depends on the one before it and the draws vary in number, so the chain is
  // walked from its start up to begin + count; only the slice is written.
  void window_part(std::int64_t step, std::int64_t index, std::int64_t len, std::int64_t begin,
                   std::int64_t count, std::int32_t* out) const override {
    check_slice(len, begin, count);
    if (count == 0) return;
    const std::int64_t end = begin + count;
    Rng rng(sequence_seed(seed_, step, index));
    std::int32_t t = std::int32_t(rng.next_u64() % std::uint64_t(vocab_));
    if (begin == 0) out[0] = t;
    for (std::int64_t i = 1; i < end; ++i) {
      const double u = rng.uniform();
      std::int32_t next = -1;
      for (int s = 0; s < kSucc && next < 0; ++s)
        if (u < cum_[idx(t, s)]) next = succ_[idx(t, s)];
      if (next < 0) next = std::int32_t(rng.next_u64() % std::uint64_t(vocab_));
      t = next;
      if (i >= begin) out[i - begin] = t;
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

// What a data file must not do while it is read.
constexpr const char* kMustNotChange = "it must not change during the run";

// Byte-level tokens from a text file; each sequence is a window at a seeded offset.
class TextFileSource final : public PartSource {
 public:
  TextFileSource(const std::string& path, int vocab, std::uint64_t seed, std::int64_t seq_len)
      : path_(path),
        seed_(seed),
        file_(checked_path(path, vocab), "", "data file", kDataNote,
              std::string("a text file (") + kDataNote + ")") {
    check_length(seq_len + 1);
    std::array<std::int64_t, 256> count{};
    file_.stream(0, 1, kMustNotChange, [&](const unsigned char* p, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) ++count[p[i]];
    });
    std::array<double, 256> prob{};
    for (std::size_t b = 0; b < 256; ++b) prob[b] = double(count[b]) / double(file_.size());
    unigram_entropy_ = entropy_nats(prob);
    all_one_byte_ = *std::max_element(count.begin(), count.end()) == file_.size()
                        ? int(std::max_element(count.begin(), count.end()) - count.begin())
                        : -1;
  }

  void window_part(std::int64_t step, std::int64_t index, std::int64_t len, std::int64_t begin,
                   std::int64_t count, std::int32_t* out) const override {
    check_slice(len, begin, count);
    if (count == 0) return;
    check_length(len);
    stream_part(window_offset(seed_, step, index, file_.size(), len) + begin, count, out);
  }
  std::int64_t stream_tokens() const override { return file_.size(); }
  void stream_part(std::int64_t first, std::int64_t count, std::int32_t* out) const override {
    check_stream_part(first, count, file_.size());
    std::vector<unsigned char> bytes(static_cast<std::size_t>(count));
    file_.read(bytes.data(), count, first, kMustNotChange);
    for (std::int64_t i = 0; i < count; ++i) out[i] = std::int32_t(bytes[std::size_t(i)]);
  }

  double unigram_entropy() const override { return unigram_entropy_; }
  std::int64_t stored_bytes() const override { return file_.size(); }
  bool can_count_targets(std::int32_t eos) const override { return all_one_byte_ != eos; }

  std::string describe() const override {
    std::ostringstream os;
    os << "text file " << path_ << " (" << file_.size()
       << " bytes, byte-level tokens): unigram entropy " << unigram_entropy_ << " nats";
    return os.str();
  }

 private:
  static constexpr const char* kDataNote = "train.data is \"synthetic\" or the path of a text file";

  // The vocabulary is checked before the file is opened.
  static const std::string& checked_path(const std::string& path, int vocab) {
    GDN_CHECK(vocab >= 256, "data file '", path, "' gives byte-level tokens, which needs ",
              "model.vocab_size >= 256, got vocab_size = ", vocab);
    return path;
  }

  void check_length(std::int64_t len) const {
    GDN_CHECK(file_.size() >= len, "data file '", path_, "' has ", file_.size(),
              " bytes, but a sequence needs ", len, " (seq_len + 1 for the next-token targets)");
  }

  std::string path_;
  std::uint64_t seed_;
  PositionalFile file_;
  double unigram_entropy_ = 0;
  int all_one_byte_ = -1;  // the byte every byte of the file is, else -1
};

// The element types of token files.
enum class TokenType { u16, u32, i32, i64 };

constexpr std::array<const char*, 4> enum_names(TokenType) {
  return {"uint16", "uint32", "int32", "int64"};
}

// Calls f with a value of the C++ type of t, so one template serves every element type.
template <typename F>
decltype(auto) visit_token_type(TokenType t, F&& f) {
  switch (t) {
    case TokenType::u16:
      return f(std::uint16_t{});
    case TokenType::u32:
      return f(std::uint32_t{});
    case TokenType::i32:
      return f(std::int32_t{});
    case TokenType::i64:
      break;
  }
  return f(std::int64_t{});
}

// Element i of a little-endian array of E at p. memcpy: a byte buffer need not be aligned
// for E.
template <typename E>
E load(const unsigned char* p, std::int64_t i) {
  E v;
  std::memcpy(&v, p + i * std::int64_t(sizeof(E)), sizeof(E));
  return v;
}

// Pre-tokenized data: a stream of token ids (a raw .u16/.u32 stream or a 1-D
// int32/int64 .npy); each sequence is a window at a seeded offset, as for text.
class TokenFileSource final : public PartSource {
 public:
  TokenFileSource(const std::string& path, bool npy, TokenType raw_type, int vocab,
                  std::uint64_t seed, std::int64_t seq_len)
      : path_(path),
        seed_(seed),
        file_(path, "", "token file", "expected " + expected(npy, raw_type),
              expected(npy, raw_type)) {
    if (npy) {
      // The file's size is checked against the header, which read_npy_header matches
      // exactly to the shape (no truncated or trailing data).
      const NpyHeader h = read_npy_header(path);
      GDN_CHECK(h.shape.size() == 1 && (h.dtype == DType::i32 || h.dtype == DType::i64),
                "token file '", path, "' holds ", dtype_name(h.dtype), " data of shape ",
                shape_str(h.shape), ": expected a 1-D int32 or int64 array of token ids");
      GDN_CHECK(h.data_offset + h.data_bytes == file_.size(), "token file '", path,
                "' changed while it was opened: its header says ", h.data_offset + h.data_bytes,
                " bytes, the file has ", file_.size());
      type_ = h.dtype == DType::i32 ? TokenType::i32 : TokenType::i64;
      begin_ = h.data_offset;
      n_ = h.shape[0];
    } else {
      type_ = raw_type;
      const std::int64_t esize = element_size();
      GDN_CHECK(file_.size() % esize == 0, "token file '", path, "' has ", file_.size(),
                " bytes, not a multiple of ", esize, ": expected ", raw_description(raw_type));
      n_ = file_.size() / esize;
    }
    check_length(seq_len + 1);
    GDN_CHECK(vocab >= 1, "token file '", path, "' needs model.vocab_size >= 1, got ", vocab);
    visit_token_type(type_, [&](auto e) { scan<decltype(e)>(vocab); });
  }

  void window_part(std::int64_t step, std::int64_t index, std::int64_t len, std::int64_t begin,
                   std::int64_t count, std::int32_t* out) const override {
    check_slice(len, begin, count);
    if (count == 0) return;
    check_length(len);
    stream_part(window_offset(seed_, step, index, n_, len) + begin, count, out);
  }
  std::int64_t stream_tokens() const override { return n_; }
  void stream_part(std::int64_t first, std::int64_t count, std::int32_t* out) const override {
    check_stream_part(first, count, n_);
    const std::int64_t esize = element_size();
    std::vector<unsigned char> bytes(static_cast<std::size_t>(count * esize));
    file_.read(bytes.data(), count * esize, begin_ + first * esize, kMustNotChange);
    visit_token_type(type_, [&](auto e) {
      using E = decltype(e);
      // In range: the scan at construction saw every id below vocab_size (an int).
      for (std::int64_t i = 0; i < count; ++i) out[i] = std::int32_t(load<E>(bytes.data(), i));
    });
  }

  double unigram_entropy() const override { return unigram_entropy_; }
  std::int64_t stored_bytes() const override { return file_.size(); }
  bool can_count_targets(std::int32_t eos) const override { return all_one_id_ != eos; }
  std::int64_t tokens() const { return n_; }
  // Where window (step, index, len) starts in the stream.
  std::int64_t window_start(std::int64_t step, std::int64_t index, std::int64_t len) const {
    return window_offset(seed_, step, index, n_, len);
  }

  std::string describe() const override {
    std::ostringstream os;
    os << "token file " << path_ << " (" << n_ << " tokens, " << name_of(type_)
       << "): unigram entropy " << unigram_entropy_ << " nats";
    return os.str();
  }

 private:
  static std::string expected(bool npy, TokenType raw_type) {
    return npy ? std::string("a .npy file of a 1-D int32 or int64 array of token ids")
               : raw_description(raw_type);
  }

  static std::string raw_description(TokenType t) {
    const std::string ext = t == TokenType::u16   ? " (.u16)"
                            : t == TokenType::u32 ? " (.u32)"
                                                  : " (the .bin of a Megatron dataset)";
    return std::string("a raw little-endian stream of ") + name_of(t) +
           " token ids, nothing else in the file" + ext;
  }

  std::int64_t element_size() const {
    return visit_token_type(type_, [](auto e) { return std::int64_t(sizeof(e)); });
  }

  void check_length(std::int64_t len) const {
    GDN_CHECK(n_ >= len, "token file '", path_, "' has ", n_, " tokens, but a sequence needs ", len,
              " (seq_len + 1 for the next-token targets)");
  }

  // One streaming pass over the file: every id must be in [0, vocab) (the embedding would
  // read out of bounds otherwise), and the frequencies give the unigram entropy.
  template <typename E>
  void scan(int vocab) {
    std::vector<std::int64_t> count(std::size_t(vocab), 0);
    std::int64_t i = 0;  // index of the block's first token in the stream
    file_.stream(
        begin_, sizeof(E), kMustNotChange, [&](const unsigned char* p, std::int64_t bytes) {
          const std::int64_t n = bytes / std::int64_t(sizeof(E));
          for (std::int64_t j = 0; j < n; ++j) {
            const auto v = std::int64_t(load<E>(p, j));
            if (std::uint64_t(v) >= std::uint64_t(vocab))  // negative ids wrap to huge values
              throw_error("token file '", path_, "': the token at index ", i + j, " is ", v,
                          ", outside [0, ", vocab, "): expected ids in [0, model.vocab_size)",
                          v < 0 ? "" : " (was the file tokenized for a larger vocabulary?)");
            ++count[std::size_t(v)];
          }
          i += n;
        });
    std::vector<double> prob(count.size());
    for (std::size_t t = 0; t < count.size(); ++t) prob[t] = double(count[t]) / double(n_);
    unigram_entropy_ = entropy_nats(prob);
    const auto top = std::max_element(count.begin(), count.end());
    all_one_id_ = *top == n_ ? std::int32_t(top - count.begin()) : -1;
  }

  std::string path_;
  std::uint64_t seed_;
  PositionalFile file_;
  TokenType type_ = TokenType::u16;
  std::int64_t begin_ = 0;  // byte offset of token 0 in the file
  std::int64_t n_ = 0;      // tokens in the stream
  double unigram_entropy_ = 0;
  std::int32_t all_one_id_ = -1;  // the id every token of the file is, else -1
};

// A Megatron-LM indexed dataset: the .bin's tokens as a raw token file of the index's
// type, and the index's document starts.
class MegatronSource final : public PartSource {
 public:
  MegatronSource(const std::string& prefix, int vocab, std::uint64_t seed, std::int64_t seq_len)
      : index_(prefix + ".idx"),
        tokens_(prefix + ".bin", false, type_of(index_), vocab, seed, seq_len) {
    GDN_CHECK(tokens_.tokens() == index_.tokens(), "Megatron dataset '", prefix, "': the index ",
              index_.path(), " holds ", index_.tokens(), " tokens but the .bin has ",
              tokens_.tokens(), ": expected the .bin written with this index");
  }

  void window_part(std::int64_t step, std::int64_t index, std::int64_t len, std::int64_t begin,
                   std::int64_t count, std::int32_t* out) const override {
    tokens_.window_part(step, index, len, begin, count, out);
  }
  bool has_documents() const override { return true; }
  std::vector<std::int64_t> document_starts(std::int64_t step, std::int64_t index,
                                            std::int64_t len) const override {
    return stream_document_starts(tokens_.window_start(step, index, len), len);
  }
  std::int64_t stream_tokens() const override { return tokens_.stream_tokens(); }
  void stream_part(std::int64_t first, std::int64_t count, std::int32_t* out) const override {
    tokens_.stream_part(first, count, out);
  }
  std::vector<std::int64_t> stream_document_starts(std::int64_t first,
                                                   std::int64_t len) const override {
    std::vector<std::int64_t> out = index_.starts_in(first, first + len);
    for (std::int64_t& p : out) p -= first;
    return out;
  }
  double unigram_entropy() const override { return tokens_.unigram_entropy(); }
  std::int64_t stored_bytes() const override { return tokens_.stored_bytes(); }
  // The index says where documents end, whatever the tokens.
  bool can_count_targets(std::int32_t) const override { return index_.has_multi_token_document(); }
  std::string describe() const override {
    std::ostringstream os;
    os << "Megatron dataset " << index_.path() << " (" << index_.documents() << " documents), "
       << tokens_.describe();
    return os.str();
  }

 private:
  static TokenType type_of(const MegatronIndex& i) {
    return i.dtype_code() == 8   ? TokenType::u16
           : i.dtype_code() == 4 ? TokenType::i32
                                 : TokenType::i64;
  }

  MegatronIndex index_;
  TokenFileSource tokens_;
};

}  // namespace

std::vector<std::int64_t> TokenSource::document_starts(std::int64_t, std::int64_t,
                                                       std::int64_t) const {
  return {};
}

void TokenSource::stream_part(std::int64_t, std::int64_t, std::int32_t*) const {
  throw_error("stream_part: ", describe(), " is not a stream of tokens");
}

std::vector<std::int64_t> TokenSource::stream_document_starts(std::int64_t, std::int64_t) const {
  return {};
}

std::uint64_t sequence_seed(std::uint64_t seed, std::int64_t step, std::int64_t index) {
  std::uint64_t h = splitmix(seed ^ 0x5EEDDA7A00000000ull);
  h = splitmix(h ^ splitmix(std::uint64_t(step) + 0x1111111111111111ull));
  h = splitmix(h ^ splitmix(std::uint64_t(index) + 0x2222222222222222ull));
  return h;
}

bool is_indexed_dataset(const std::string& data) {
  const std::string ext = std::filesystem::path(data).extension().string();
  return ext == ".bin" || ext == ".idx";
}

std::vector<std::int64_t> window_document_starts(const TokenSource& src, std::int64_t step,
                                                 std::int64_t index, std::int64_t seq_len,
                                                 const std::int32_t* inputs, std::int32_t eos) {
  if (src.has_documents()) return src.document_starts(step, index, seq_len + 1);
  GDN_CHECK(inputs, "window_document_starts: the window's tokens are needed to find EOS");
  return Documents::starts_after(inputs, seq_len, eos);
}

void TokenSource::window_part(std::int64_t step, std::int64_t index, std::int64_t len,
                              std::int64_t begin, std::int64_t count, std::int32_t* out) const {
  check_slice(len, begin, count);
  if (count == 0) return;
  std::vector<std::int32_t> window(static_cast<std::size_t>(len));
  sequence(step, index, len, window.data());
  std::copy_n(window.data() + begin, count, out);
}

std::unique_ptr<TokenSource> make_token_source(const std::string& data, int vocab_size,
                                               std::uint64_t seed, std::int64_t seq_len) {
  GDN_CHECK(seq_len >= 1, "seq_len ", seq_len, " for the data source: expected >= 1");
  if (is_blend(data)) return make_blend(data, vocab_size, seed, seq_len);
  if (data == "synthetic") return std::make_unique<SyntheticSource>(vocab_size, seed);
  // The file name chooses the format; everything else is text.
  const std::string ext = std::filesystem::path(data).extension().string();
  if (is_indexed_dataset(data))
    return std::make_unique<MegatronSource>(
        std::filesystem::path(data).replace_extension().string(), vocab_size, seed, seq_len);
  if (ext == ".u16" || ext == ".u32" || ext == ".npy")
    return std::make_unique<TokenFileSource>(data, ext == ".npy",
                                             ext == ".u16" ? TokenType::u16 : TokenType::u32,
                                             vocab_size, seed, seq_len);
  return std::make_unique<TextFileSource>(data, vocab_size, seed, seq_len);
}

}  // namespace gdn
