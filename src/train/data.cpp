#include "train/data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/npy.h"
#include "core/rng.h"

namespace gdn {

// Token files are read in place, element bytes as they lie in the file: the host must be
// little-endian like the formats.
static_assert(std::endian::native == std::endian::little, "gdn-cp assumes a little-endian host");

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

// The offset of sequence (step, index)'s window of len tokens in a stream of n >= len:
// uniform in [0, n - len]. Shared by the file sources, so a token file holding a text's
// bytes gives exactly that text's windows.
std::int64_t window_offset(std::uint64_t seed, std::int64_t step, std::int64_t index,
                           std::int64_t n, std::int64_t len) {
  Rng rng(sequence_seed(seed, step, index));
  const std::uint64_t positions = std::uint64_t(n) - std::uint64_t(len) + 1;
  return std::int64_t(rng.next_u64() % positions);
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
    const auto offset =
        std::size_t(window_offset(seed_, step, index, std::int64_t(bytes_.size()), len));
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

// A whole file mapped read-only. A token source reads each window in place, so a token
// file need not fit in RAM: the page cache holds the parts in use. The file must not
// shrink while it is mapped (reading a page past its new end is a SIGBUS).
class MappedFile {
 public:
  // `expected` says what the file should hold, for the messages.
  MappedFile(const std::string& path, const std::string& expected) {
    // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it is refused below.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      throw_error("cannot open token file '", path, "': ", std::strerror(err), " (expected ",
                  expected, ")");
    }
    struct stat st {};
    const int rc = ::fstat(fd, &st);
    const int err = errno;
    if (rc != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      GDN_CHECK(rc == 0, "cannot stat token file '", path, "': ", std::strerror(err));
      throw_error("token file '", path, "' is ",
                  S_ISDIR(st.st_mode) ? "a directory" : "not a regular file", ": expected ",
                  expected);
    }
    size_ = std::int64_t(st.st_size);
    if (size_ > 0) {  // mmap refuses a length of 0
      void* p = ::mmap(nullptr, std::size_t(size_), PROT_READ, MAP_PRIVATE, fd, 0);
      const int map_err = errno;
      ::close(fd);  // the mapping keeps its own reference to the file
      GDN_CHECK(p != MAP_FAILED, "cannot map token file '", path, "' (", size_,
                " bytes): ", std::strerror(map_err));
      data_ = static_cast<const unsigned char*>(p);
    } else {
      ::close(fd);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<unsigned char*>(data_), std::size_t(size_));
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  std::int64_t size() const { return size_; }
  // A hint to the kernel's read-ahead (MADV_SEQUENTIAL for one pass over the file,
  // MADV_NORMAL for the windows); failure only costs speed.
  void advise(int advice) const {
    if (data_) ::madvise(const_cast<unsigned char*>(data_), std::size_t(size_), advice);
  }

 private:
  const unsigned char* data_ = nullptr;
  std::int64_t size_ = 0;
};

// The element types of token files.
enum class TokenType { u16, u32, i32, i64 };

const char* token_type_name(TokenType t) {
  switch (t) {
    case TokenType::u16:
      return "uint16";
    case TokenType::u32:
      return "uint32";
    case TokenType::i32:
      return "int32";
    case TokenType::i64:
      return "int64";
  }
  return "?";
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

// Element i of a little-endian array of E at p. memcpy because an .npy's data need not be
// aligned for E (numpy pads headers to 64 bytes, old versions only to 16).
template <typename E>
E load(const unsigned char* p, std::int64_t i) {
  E v;
  std::memcpy(&v, p + i * std::int64_t(sizeof(E)), sizeof(E));
  return v;
}

// Pre-tokenized data: a mapped stream of token ids (a raw .u16/.u32 stream or a 1-D
// int32/int64 .npy); each sequence is a window at a seeded offset, as for text.
class TokenFileSource final : public TokenSource {
 public:
  TokenFileSource(const std::string& path, bool npy, TokenType raw_type, int vocab,
                  std::uint64_t seed, std::int64_t seq_len)
      : path_(path),
        seed_(seed),
        file_(path, npy ? std::string("a .npy file of a 1-D int32 or int64 array of token ids")
                        : raw_description(raw_type)) {
    if (npy) {
      // The mapping's size is checked against the header, which read_npy_header matches
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
    file_.advise(MADV_SEQUENTIAL);
    visit_token_type(type_, [&](auto e) { scan<decltype(e)>(vocab); });
    file_.advise(MADV_NORMAL);
  }

  void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                std::int32_t* out) const override {
    if (len <= 0) return;
    check_length(len);
    const std::int64_t offset = window_offset(seed_, step, index, n_, len);
    visit_token_type(type_, [&](auto e) {
      using E = decltype(e);
      const unsigned char* p = file_.data() + begin_;
      // In range: the scan at construction saw every id below vocab_size (an int).
      for (std::int64_t i = 0; i < len; ++i) out[i] = std::int32_t(load<E>(p, offset + i));
    });
  }

  double unigram_entropy() const override { return unigram_entropy_; }

  std::string describe() const override {
    std::ostringstream os;
    os << "token file " << path_ << " (" << n_ << " tokens, " << token_type_name(type_)
       << "): unigram entropy " << unigram_entropy_ << " nats";
    return os.str();
  }

 private:
  static std::string raw_description(TokenType t) {
    return std::string("a raw little-endian stream of ") + token_type_name(t) +
           " token ids, nothing else in the file (." + (t == TokenType::u16 ? "u16" : "u32") + ")";
  }

  std::int64_t element_size() const {
    return visit_token_type(type_, [](auto e) { return std::int64_t(sizeof(e)); });
  }

  void check_length(std::int64_t len) const {
    GDN_CHECK(n_ >= len, "token file '", path_, "' has ", n_, " tokens, but a sequence needs ", len,
              " (seq_len + 1 for the next-token targets)");
  }

  // One pass over the file: every id must be in [0, vocab) (the embedding would read out
  // of bounds otherwise), and the frequencies give the unigram entropy.
  template <typename E>
  void scan(int vocab) {
    const unsigned char* p = file_.data() + begin_;
    std::vector<std::int64_t> count(std::size_t(vocab), 0);
    for (std::int64_t i = 0; i < n_; ++i) {
      const auto v = std::int64_t(load<E>(p, i));
      if (std::uint64_t(v) >= std::uint64_t(vocab))  // negative ids wrap to huge values
        throw_error("token file '", path_, "': the token at index ", i, " is ", v, ", outside [0, ",
                    vocab, "): expected ids in [0, model.vocab_size)",
                    v < 0 ? "" : " (was the file tokenized for a larger vocabulary?)");
      ++count[std::size_t(v)];
    }
    std::vector<double> prob(count.size());
    for (std::size_t t = 0; t < count.size(); ++t) prob[t] = double(count[t]) / double(n_);
    unigram_entropy_ = entropy_nats(prob);
  }

  std::string path_;
  std::uint64_t seed_;
  MappedFile file_;
  TokenType type_ = TokenType::u16;
  std::int64_t begin_ = 0;  // byte offset of token 0 in the file
  std::int64_t n_ = 0;      // tokens in the stream
  double unigram_entropy_ = 0;
};

}  // namespace

std::unique_ptr<TokenSource> make_token_source(const std::string& data, int vocab_size,
                                               std::uint64_t seed, std::int64_t seq_len) {
  GDN_CHECK(seq_len >= 1, "seq_len ", seq_len, " for the data source: expected >= 1");
  if (data == "synthetic") return std::make_unique<SyntheticSource>(vocab_size, seed);
  // The file name chooses the format; everything else is text.
  const std::string ext = std::filesystem::path(data).extension().string();
  if (ext == ".u16" || ext == ".u32" || ext == ".npy")
    return std::make_unique<TokenFileSource>(data, ext == ".npy",
                                             ext == ".u16" ? TokenType::u16 : TokenType::u32,
                                             vocab_size, seed, seq_len);
  return std::make_unique<TextFileSource>(data, vocab_size, seed, seq_len);
}

}  // namespace gdn
