// Tests src/train/data: the synthetic, text and token-file sources, and their slices.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/npy.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "test_support.h"
#include "train/blend.h"
#include "train/data.h"

using namespace gdn;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::string find_public_domain_text() {
  const fs::path rel = fs::path("data") / "public_domain.txt";
  // This file is tests/unit/test_data.cpp: the repository is three levels up.
  const fs::path root = fs::path(__FILE__).parent_path().parent_path().parent_path();
  const fs::path from_source = root / rel;
  if (fs::exists(from_source)) return from_source.string();
  // Else walk up from the working directory and from the binary (build dirs are inside
  // the repository).
  std::error_code ec;
  for (fs::path start : {fs::current_path(), fs::read_symlink("/proc/self/exe", ec)}) {
    for (fs::path d = start; !d.empty(); d = d.parent_path()) {
      if (fs::exists(d / rel)) return (d / rel).string();
      if (d == d.parent_path()) break;
    }
  }
  FAIL("cannot find data/public_domain.txt from " << __FILE__
                                                  << ", the current directory or the binary");
  return {};
}

}  // namespace

TEST_CASE("synthetic data: deterministic, in range, and learnable", "[data]") {
  const int vocab = 64;
  auto src = make_token_source("synthetic", vocab, 7, 128);
  std::vector<std::int32_t> a(129), b(129), c(129), d(129);
  src->sequence(3, 5, 129, a.data());
  src->sequence(3, 5, 129, b.data());
  src->sequence(3, 6, 129, c.data());
  src->sequence(4, 5, 129, d.data());
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);
  // A fresh source with the same seed gives the same tokens; another seed does not.
  std::vector<std::int32_t> e(129), f(129);
  make_token_source("synthetic", vocab, 7, 128)->sequence(3, 5, 129, e.data());
  make_token_source("synthetic", vocab, 8, 128)->sequence(3, 5, 129, f.data());
  CHECK(a == e);
  CHECK(a != f);

  const double h = src->unigram_entropy();
  CHECK(h > 0);
  CHECK(h < std::log(double(vocab)));
  CHECK_THAT(src->describe(), Contains("synthetic"));

  // Structure: the 4 most frequent successors of each token carry most transitions.
  std::map<std::pair<int, int>, int> bigram;
  std::vector<std::int32_t> s(257);
  for (int i = 0; i < 200; ++i) {
    src->sequence(0, i, 257, s.data());
    for (std::size_t t = 0; t < s.size(); ++t) {
      REQUIRE(s[t] >= 0);
      REQUIRE(s[t] < vocab);
      if (t > 0) ++bigram[{s[t - 1], s[t]}];
    }
  }
  std::vector<std::vector<int>> per(vocab);
  int total = 0;
  for (const auto& [k, n] : bigram) per[k.first].push_back(n), total += n;
  int top = 0;
  for (auto& v : per) {
    std::sort(v.rbegin(), v.rend());
    for (std::size_t i = 0; i < v.size() && i < 4; ++i) top += v[i];
  }
  CHECK(double(top) / total > 0.9);
}

TEST_CASE("text data: byte tokens from data/public_domain.txt", "[data]") {
  const std::string path = find_public_domain_text();
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(text.size() >= 60000);

  auto src = make_token_source(path, 256, 1, 64);
  std::vector<std::int32_t> a(65), b(65), c(65);
  src->sequence(2, 0, 65, a.data());
  src->sequence(2, 0, 65, b.data());
  src->sequence(2, 1, 65, c.data());
  CHECK(a == b);
  CHECK(a != c);
  // Each sequence is a window of the file.
  std::string window;
  for (const std::int32_t t : a) {
    REQUIRE(t >= 0);
    REQUIRE(t < 256);
    window += char(t);
  }
  CHECK(text.find(window) != std::string::npos);
  // English bytes: a few nats, below the uniform log(256).
  CHECK(src->unigram_entropy() > 2.0);
  CHECK(src->unigram_entropy() < std::log(256.0));
  CHECK_THAT(src->describe(), Contains(path));

  CHECK_THROWS_WITH(make_token_source(path, 100, 1, 64),
                    Contains("vocab_size = 100") && Contains(path));
}

TEST_CASE("text data: missing and short files are errors naming the file", "[data]") {
  const test::TempDir tmp("gdn_test_data");
  CHECK_THROWS_WITH(make_token_source(tmp / "none.txt", 256, 1, 8), Contains(tmp / "none.txt"));
  const std::string shorty = tmp / "short.txt";
  std::ofstream(shorty) << "0123456789";
  CHECK_THROWS_WITH(make_token_source(shorty, 256, 1, 64),
                    Contains(shorty) && Contains("has 10 bytes") && Contains("needs 65"));
  CHECK_NOTHROW(make_token_source(shorty, 256, 1, 9));  // exactly seq_len + 1
}

// ---------------------------------------------------------------- token files

namespace {

// Writes ids as a raw little-endian stream of E (the host is little-endian).
template <typename E>
void write_raw(const std::string& path, const std::vector<std::int64_t>& ids) {
  std::ofstream out(path, std::ios::binary);
  for (const std::int64_t id : ids) {
    const E e = E(id);
    out.write(reinterpret_cast<const char*>(&e), sizeof e);
  }
  REQUIRE(out.good());
}

// Writes ids as a 1-D .npy of E (int32_t or int64_t).
template <typename E>
void write_ids_npy(const std::string& path, const std::vector<std::int64_t>& ids) {
  Tensor<E> t(Shape{std::int64_t(ids.size())});
  for (std::size_t i = 0; i < ids.size(); ++i) t.data[i] = E(ids[i]);
  write_npy(path, t);
}

// The same ids in all four formats; returns the paths.
std::vector<std::string> write_all_formats(const test::TempDir& tmp, const std::string& stem,
                                           const std::vector<std::int64_t>& ids) {
  const std::vector<std::string> paths = {tmp / (stem + ".u16"), tmp / (stem + ".u32"),
                                          tmp / (stem + "_i32.npy"), tmp / (stem + "_i64.npy")};
  write_raw<std::uint16_t>(paths[0], ids);
  write_raw<std::uint32_t>(paths[1], ids);
  write_ids_npy<std::int32_t>(paths[2], ids);
  write_ids_npy<std::int64_t>(paths[3], ids);
  return paths;
}

// Random ids over the whole uint16 range (ids >= 32768 show that uint16 is read unsigned),
// with both ends of the range present.
std::vector<std::int64_t> random_ids(std::int64_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t& x : ids) x = std::int64_t(rng.next_u64() % 65536);
  ids[0] = 65535;
  ids[std::size_t(n) - 1] = 0;
  return ids;
}

// Every offset at which seq is a window of the stream.
std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& stream,
                                     const std::vector<std::int32_t>& seq) {
  std::vector<std::int64_t> out;
  for (std::size_t o = 0; o + seq.size() <= stream.size(); ++o)
    if (std::equal(seq.begin(), seq.end(), stream.begin() + std::ptrdiff_t(o))) out.push_back(o);
  return out;
}

}  // namespace

TEST_CASE("token files: every sequence is a window of the stream, the same in every format",
          "[data]") {
  const test::TempDir tmp("gdn_test_data");
  const int vocab = 151936;
  const std::int64_t n = 300, seq_len = 32, len = seq_len + 1;
  const std::vector<std::int64_t> ids = random_ids(n, 5);
  const std::vector<std::string> paths = write_all_formats(tmp, "tokens", ids);
  std::vector<std::unique_ptr<TokenSource>> src;
  for (const std::string& p : paths) src.push_back(make_token_source(p, vocab, 11, seq_len));

  std::vector<std::int32_t> seq(len), other(len);
  for (std::int64_t step = 0; step < 4; ++step) {
    for (std::int64_t index = 0; index < 50; ++index) {
      src[0]->sequence(step, index, len, seq.data());
      for (const std::int32_t t : seq) {
        REQUIRE(t >= 0);
        REQUIRE(t < vocab);
      }
      INFO("step " << step << ", index " << index);
      REQUIRE(!offsets_of(ids, seq).empty());
      // The same windows whatever the format: the offsets depend on (seed, step, index)
      // and the stream's length only.
      for (std::size_t f = 1; f < src.size(); ++f) {
        src[f]->sequence(step, index, len, other.data());
        REQUIRE(other == seq);
      }
    }
  }
  CHECK_THAT(src[0]->describe(),
             Contains(paths[0]) && Contains("300 tokens, uint16") && Contains("unigram entropy"));
  CHECK_THAT(src[1]->describe(), Contains("300 tokens, uint32"));
  CHECK_THAT(src[2]->describe(), Contains("300 tokens, int32"));
  CHECK_THAT(src[3]->describe(), Contains(paths[3]) && Contains("300 tokens, int64"));

  // Ids beyond 16 bits (up to 248319, Qwen3.5's vocabulary) come back whole from .u32
  // and int64 .npy: the same windows, shifted by the offset that was added.
  const std::int64_t shift = 180000;
  std::vector<std::int64_t> big = ids;
  for (std::int64_t& x : big) x += shift;
  write_raw<std::uint32_t>(tmp / "big.u32", big);
  write_ids_npy<std::int64_t>(tmp / "big.npy", big);
  for (const std::string& p : {tmp / "big.u32", tmp / "big.npy"}) {
    auto s = make_token_source(p, 248320, 11, seq_len);
    for (std::int64_t index = 0; index < 20; ++index) {
      src[0]->sequence(1, index, len, seq.data());
      s->sequence(1, index, len, other.data());
      for (std::int64_t i = 0; i < len; ++i) REQUIRE(other[i] == seq[i] + shift);
    }
  }

  // Windows reach both ends of the stream and never run past it: with 8 possible offsets
  // (n = 40, len 33), 200 draws see each of them.
  const std::vector<std::int64_t> small(ids.begin(), ids.begin() + 40);
  write_raw<std::uint16_t>(tmp / "small.u16", small);
  auto s = make_token_source(tmp / "small.u16", vocab, 3, seq_len);
  std::map<std::int64_t, int> seen;
  for (std::int64_t index = 0; index < 200; ++index) {
    s->sequence(0, index, len, seq.data());
    const std::vector<std::int64_t> o = offsets_of(small, seq);
    REQUIRE(o.size() == 1);
    ++seen[o[0]];
  }
  CHECK(seen.size() == 8);
  CHECK(seen.begin()->first == 0);
  CHECK(seen.rbegin()->first == 7);
  // Exactly seq_len + 1 tokens: one window, the whole stream.
  const std::vector<std::int64_t> exact(ids.begin(), ids.begin() + len);
  write_raw<std::uint32_t>(tmp / "exact.u32", exact);
  make_token_source(tmp / "exact.u32", vocab, 3, seq_len)->sequence(9, 9, len, seq.data());
  CHECK(offsets_of(exact, seq) == std::vector<std::int64_t>{0});
}

TEST_CASE("token files: deterministic in (seed, step, index), independent of call order",
          "[data]") {
  const test::TempDir tmp("gdn_test_data");
  const std::int64_t seq_len = 16, len = seq_len + 1;
  const std::vector<std::int64_t> ids = random_ids(5000, 8);
  for (const std::string& path : write_all_formats(tmp, "det", ids)) {
    INFO(path);
    auto draw = [&](const TokenSource& src, std::int64_t step, std::int64_t index) {
      std::vector<std::int32_t> s(len);
      src.sequence(step, index, len, s.data());
      return s;
    };
    // One source draws the grid in order, a fresh one in reverse order.
    auto a = make_token_source(path, 65536, 21, seq_len);
    auto b = make_token_source(path, 65536, 21, seq_len);
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int32_t>> fwd, rev;
    for (std::int64_t step = 0; step < 5; ++step)
      for (std::int64_t index = 0; index < 8; ++index) fwd[{step, index}] = draw(*a, step, index);
    for (std::int64_t step = 4; step >= 0; --step)
      for (std::int64_t index = 7; index >= 0; --index) rev[{step, index}] = draw(*b, step, index);
    CHECK(fwd == rev);
    CHECK(draw(*a, 2, 3) == fwd[{2, 3}]);  // again, after the others
    // Another step, index or seed gives another window.
    CHECK(fwd[{2, 3}] != fwd[{2, 4}]);
    CHECK(fwd[{2, 3}] != fwd[{3, 3}]);
    auto c = make_token_source(path, 65536, 22, seq_len);
    CHECK(draw(*c, 2, 3) != fwd[{2, 3}]);
  }
}

TEST_CASE("token files: unigram entropy from the token frequencies", "[data]") {
  const test::TempDir tmp("gdn_test_data");
  // Frequencies 1/2, 1/4, 1/8, 1/8: H = 1/2 ln 2 + 1/4 ln 4 + 2/8 ln 8 = 1.75 ln 2.
  const double h = 1.75 * std::log(2.0);
  for (const std::string& path : write_all_formats(tmp, "freq", {0, 1, 0, 2, 0, 1, 3, 0})) {
    INFO(path);
    const auto src = make_token_source(path, 4, 1, 4);
    CHECK(src->unigram_entropy() == Approx(h).epsilon(1e-14));
    CHECK_THAT(src->describe(), Contains("8 tokens"));
  }
  // The same frequencies at the ends of a 248320-token vocabulary.
  write_raw<std::uint32_t>(tmp / "wide.u32", {248319, 7, 248319, 151935, 248319, 7, 0, 248319});
  CHECK(make_token_source(tmp / "wide.u32", 248320, 1, 4)->unigram_entropy() ==
        Approx(h).epsilon(1e-14));
  // A single distinct token: zero entropy.
  write_raw<std::uint16_t>(tmp / "one.u16", {5, 5, 5, 5});
  CHECK(make_token_source(tmp / "one.u16", 6, 1, 3)->unigram_entropy() == 0.0);
}

TEST_CASE("token files: a .u16 of a text's bytes reads exactly what the text source reads",
          "[data]") {
  const test::TempDir tmp("gdn_test_data");
  const std::string text_path = find_public_domain_text();
  std::ifstream in(text_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::int64_t> bytes(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) bytes[i] = static_cast<unsigned char>(text[i]);
  write_raw<std::uint16_t>(tmp / "text.u16", bytes);
  auto as_text = make_token_source(text_path, 256, 4, 128);
  auto as_tokens = make_token_source(tmp / "text.u16", 256, 4, 128);
  // The same counts summed in the same order: the same bits.
  CHECK(as_tokens->unigram_entropy() == as_text->unigram_entropy());
  std::vector<std::int32_t> a(129), b(129);
  for (std::int64_t index = 0; index < 64; ++index) {
    as_text->sequence(index % 5, index, 129, a.data());
    as_tokens->sequence(index % 5, index, 129, b.data());
    REQUIRE(a == b);
  }
  CHECK_THAT(as_tokens->describe(), Contains(std::to_string(text.size()) + " tokens, uint16"));
}

TEST_CASE("token files: bad input is an error naming the file and what was expected", "[data]") {
  const test::TempDir tmp("gdn_test_data");
  const std::vector<std::int64_t> ok(100, 1);
  // Missing, a directory.
  for (const std::string& p : {tmp / "none.u16", tmp / "none.u32", tmp / "none.npy"})
    CHECK_THROWS_WITH(make_token_source(p, 256, 1, 8),
                      Contains("cannot open token file '" + p + "'") && Contains("No such file") &&
                          Contains("expected"));
  fs::create_directory(tmp / "dir.u16");
  fs::create_directory(tmp / "dir.npy");
  CHECK_THROWS_WITH(make_token_source(tmp / "dir.u16", 256, 1, 8),
                    Contains(tmp / "dir.u16") && Contains("is a directory") &&
                        Contains("raw little-endian stream of uint16 token ids"));
  CHECK_THROWS_WITH(make_token_source(tmp / "dir.npy", 256, 1, 8),
                    Contains(tmp / "dir.npy") && Contains("is a directory") &&
                        Contains("1-D int32 or int64 array"));
  // Raw sizes that are not a whole number of ids.
  std::ofstream(tmp / "odd.u16", std::ios::binary) << std::string(201, 'a');
  std::ofstream(tmp / "odd.u32", std::ios::binary) << std::string(402, 'a');
  CHECK_THROWS_WITH(make_token_source(tmp / "odd.u16", 65536, 1, 8),
                    Contains(tmp / "odd.u16") && Contains("has 201 bytes, not a multiple of 2"));
  CHECK_THROWS_WITH(make_token_source(tmp / "odd.u32", 1 << 30, 1, 8),
                    Contains(tmp / "odd.u32") && Contains("has 402 bytes, not a multiple of 4") &&
                        Contains("uint32"));
  // Shorter than seq_len + 1; empty.
  const std::vector<std::int64_t> ten(10, 3);
  for (const std::string& p : write_all_formats(tmp, "short", ten)) {
    CHECK_THROWS_WITH(make_token_source(p, 256, 1, 64),
                      Contains(p) && Contains("has 10 tokens") && Contains("needs 65"));
    CHECK_NOTHROW(make_token_source(p, 256, 1, 9));  // exactly seq_len + 1
  }
  std::ofstream(tmp / "empty.u32", std::ios::binary).close();
  CHECK_THROWS_WITH(make_token_source(tmp / "empty.u32", 256, 1, 8),
                    Contains(tmp / "empty.u32") && Contains("has 0 tokens"));
  // .npy files that are not a 1-D int32/int64 array, or not .npy at all.
  write_npy(tmp / "2d.npy", Tensor<std::int32_t>(Shape{10, 10}, 1));
  write_npy(tmp / "f32.npy", Tensor<float>(Shape{100}, 1));
  write_npy(tmp / "f64.npy", Tensor<double>(Shape{100}, 1));
  write_npy(tmp / "0d.npy", Tensor<std::int64_t>(Shape{}, 1));
  CHECK_THROWS_WITH(make_token_source(tmp / "2d.npy", 256, 1, 8),
                    Contains(tmp / "2d.npy") && Contains("i32 data of shape [10, 10]") &&
                        Contains("expected a 1-D int32 or int64 array of token ids"));
  CHECK_THROWS_WITH(make_token_source(tmp / "f32.npy", 256, 1, 8),
                    Contains(tmp / "f32.npy") && Contains("f32 data of shape [100]") &&
                        Contains("expected a 1-D int32 or int64 array"));
  CHECK_THROWS_WITH(make_token_source(tmp / "f64.npy", 256, 1, 8),
                    Contains(tmp / "f64.npy") && Contains("f64 data"));
  CHECK_THROWS_WITH(make_token_source(tmp / "0d.npy", 256, 1, 8),
                    Contains(tmp / "0d.npy") && Contains("shape []"));
  std::ofstream(tmp / "text.npy", std::ios::binary) << std::string(200, 'x');
  CHECK_THROWS_WITH(make_token_source(tmp / "text.npy", 256, 1, 8),
                    Contains(tmp / "text.npy") && Contains("not a .npy file"));
  write_ids_npy<std::int32_t>(tmp / "cut.npy", ok);
  fs::resize_file(tmp / "cut.npy", fs::file_size(tmp / "cut.npy") - 1);
  CHECK_THROWS_WITH(make_token_source(tmp / "cut.npy", 256, 1, 8),
                    Contains(tmp / "cut.npy") && Contains("truncated data"));
  // Ids outside [0, vocab_size): the first bad index and its value.
  std::vector<std::int64_t> bad = ok;
  bad[5] = 300;
  bad[6] = 400;  // a later one is not reported
  for (const std::string& p : write_all_formats(tmp, "range", bad))
    CHECK_THROWS_WITH(make_token_source(p, 256, 1, 8),
                      Contains(p) && Contains("the token at index 5 is 300, outside [0, 256)") &&
                          Contains("larger vocabulary"));
  bad = ok;
  bad[99] = 256;  // the last id, just past the end
  write_raw<std::uint16_t>(tmp / "edge.u16", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "edge.u16", 256, 1, 8),
                    Contains("index 99 is 256, outside [0, 256)"));
  CHECK_NOTHROW(make_token_source(tmp / "edge.u16", 257, 1, 8));
  bad = ok;
  bad[0] = 0xFFFFFFFFll;
  write_raw<std::uint32_t>(tmp / "max.u32", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "max.u32", 248320, 1, 8),
                    Contains(tmp / "max.u32") && Contains("index 0 is 4294967295"));
  bad = ok;
  bad[3] = -1;
  write_ids_npy<std::int32_t>(tmp / "neg32.npy", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "neg32.npy", 256, 1, 8),
                    Contains(tmp / "neg32.npy") && Contains("index 3 is -1, outside [0, 256)"));
  bad[3] = -(1ll << 40);
  bad[4] = 1ll << 40;
  write_ids_npy<std::int64_t>(tmp / "neg64.npy", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "neg64.npy", 256, 1, 8),
                    Contains(tmp / "neg64.npy") && Contains("index 3 is -1099511627776"));
  bad[3] = 1;
  write_ids_npy<std::int64_t>(tmp / "big64.npy", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "big64.npy", 248320, 1, 8),
                    Contains(tmp / "big64.npy") && Contains("index 4 is 1099511627776"));
}

// ---------------------------------------------------------------- sequence slices

namespace {

// A source that only knows whole windows: it gets TokenSource's default window_part.
class WholeWindowSource final : public TokenSource {
 public:
  void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                std::int32_t* out) const override {
    for (std::int64_t i = 0; i < len; ++i) out[i] = std::int32_t((step * 31 + index * 7 + i) % 97);
  }
  double unigram_entropy() const override { return 0; }
  std::string describe() const override { return "whole windows"; }
};

}  // namespace

TEST_CASE("window_part gives exactly that part of sequence()'s window, for every source",
          "[data]") {
  const test::TempDir tmp("gdn_test_data");
  const std::int64_t seq_len = 128, len = seq_len + 1;
  std::vector<std::pair<std::string, std::unique_ptr<TokenSource>>> sources;
  sources.emplace_back("synthetic", make_token_source("synthetic", 64, 7, seq_len));
  sources.emplace_back("text", make_token_source(find_public_domain_text(), 256, 3, seq_len));
  for (const std::string& p : write_all_formats(tmp, "slice", random_ids(5000, 9)))
    sources.emplace_back(p, make_token_source(p, 65536, 3, seq_len));
  sources.emplace_back("default", std::make_unique<WholeWindowSource>());

  // Slices at the start, in the middle, to the end, the last token alone, empty ones
  // (also at the very end), the whole window; and every cp rank's [t0, t1 + 1) as the
  // trainer reads them, for several cp.
  std::vector<std::pair<std::int64_t, std::int64_t>> slices = {
      {0, 0},    {0, 1},       {0, 2},       {0, 64},  {37, 50}, {64, 65},
      {100, 29}, {len - 1, 1}, {len - 2, 2}, {len, 0}, {50, 0},  {0, len}};
  for (const int cp : {1, 2, 3, 4, 7, 128}) {
    const std::int64_t per = (seq_len + cp - 1) / cp;
    for (int r = 0; r < cp; ++r) {
      const std::int64_t b = std::min(seq_len, per * r), e = std::min(seq_len, per * (r + 1));
      slices.push_back({b, e - b + 1});
    }
  }
  for (const auto& [name, src] : sources) {
    INFO(name);
    for (const auto& [step, index] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 0}, {0, 5}, {3, 1}, {11, 40}}) {
      std::vector<std::int32_t> whole(len);
      src->sequence(step, index, len, whole.data());
      for (const auto& [begin, count] : slices) {
        INFO("step " << step << ", index " << index << ", tokens [" << begin << ", "
                     << begin + count << ")");
        // Guards around the slice: nothing outside [out, out + count) is written.
        std::vector<std::int32_t> part(std::size_t(count) + 2, -7);
        src->window_part(step, index, len, begin, count, part.data() + 1);
        REQUIRE(part.front() == -7);
        REQUIRE(part.back() == -7);
        REQUIRE(std::equal(part.begin() + 1, part.end() - 1, whole.begin() + begin));
      }
    }
    // A slice outside the window is refused.
    std::vector<std::int32_t> out(len + 1);
    CHECK_THROWS_WITH(src->window_part(0, 0, len, len - 1, 2, out.data()),
                      Contains("tokens [128, 130) are not inside a window of 129 tokens"));
    CHECK_THROWS_WITH(src->window_part(0, 0, len, -1, 1, out.data()), Contains("[-1, 0)"));
    CHECK_THROWS_WITH(src->window_part(0, 0, len, 0, -1, out.data()),
                      Contains("not inside a window"));
  }
}

TEST_CASE("file sources read from the file at each window: one that shrank is an error", "[data]") {
  const test::TempDir tmp("gdn_test_data");
  const std::vector<std::int64_t> ids = random_ids(1000, 4);
  std::vector<std::string> paths = write_all_formats(tmp, "shrink", ids);
  {
    std::ofstream text(tmp / "shrink.txt", std::ios::binary);
    for (const std::int64_t x : ids) text << char('a' + x % 26);
  }
  paths.push_back(tmp / "shrink.txt");
  for (const std::string& p : paths) {
    INFO(p);
    const auto src = make_token_source(p, 65536, 5, 100);
    std::vector<std::int32_t> seq(101);
    CHECK_NOTHROW(src->sequence(0, 0, 101, seq.data()));
    fs::resize_file(p, 64);  // shorter than any window's end at byte >= 64 of the data
    CHECK_THROWS_WITH(
        [&] {
          for (std::int64_t index = 0; index < 20; ++index)
            src->sequence(0, index, 101, seq.data());
        }(),
        Contains(p) && Contains("must not change during the run"));
  }
  // A text "file" that is a FIFO (or any other non-regular file) is refused at once
  // instead of waiting for a writer.
  const std::string fifo = tmp / "fifo.txt";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(make_token_source(fifo, 256, 1, 8),
                    Contains("data file '" + fifo + "' is not a regular file"));
  fs::create_directory(tmp / "dir.txt");
  CHECK_THROWS_WITH(make_token_source(tmp / "dir.txt", 256, 1, 8),
                    Contains("data file '" + tmp / "dir.txt" +
                             "' is a directory: expected a text "
                             "file (train.data is \"synthetic\" or the path of a text file)"));
  CHECK_THROWS_WITH(make_token_source(tmp / "none.txt", 256, 1, 8),
                    Contains("cannot open data file '" + tmp / "none.txt" +
                             "': No such file or directory (train.data is \"synthetic\""));
}

// ---------------------------------------------------------------- blends

TEST_CASE("a blend's realised shares follow its weights within 2%", "[data]") {
  const std::vector<double> w = {3.5, 1.0, 0.0, 0.5};  // need not sum to 1
  std::vector<int> n(w.size());
  const int steps = 200, rows = 64;
  for (int s = 0; s < steps; ++s)
    for (int i = 0; i < rows; ++i) ++n[std::size_t(blend_choice(w, 7, s, i))];
  CHECK(n[2] == 0);  // weight 0: never drawn
  for (std::size_t k = 0; k < w.size(); ++k)
    CHECK(std::abs(double(n[k]) / (steps * rows) - w[k] / 5.0) <= 0.02);
  // A function of (seed, step, index): the same again, and another seed draws otherwise.
  CHECK(blend_choice(w, 7, 12, 3) == blend_choice(w, 7, 12, 3));
  int differ = 0;
  for (int i = 0; i < 100; ++i) differ += blend_choice(w, 7, 0, i) != blend_choice(w, 8, 0, i);
  CHECK(differ > 10);
}

TEST_CASE("a blend draws each window from its chosen file; a blend of one is that file", "[data]") {
  const test::TempDir tmp("gdn_test_blend");
  const std::string a = tmp / "a.txt", b = tmp / "b.txt";
  std::ofstream(a) << std::string(300, 'a');
  std::ofstream(b) << std::string(500, 'b');
  const std::string spec = "0.7:" + a + ",0.3:" + b;
  REQUIRE(is_blend(spec));
  const auto blend = make_token_source(spec, 256, 5, 32);
  int from_b = 0;
  for (int s = 0; s < 20; ++s)
    for (int i = 0; i < 10; ++i) {
      std::vector<std::int32_t> w(33), part(8);
      blend->sequence(s, i, 33, w.data());
      const int chosen = blend_choice({0.7, 0.3}, 5, s, i);
      from_b += chosen;
      CHECK(std::all_of(w.begin(), w.end(),
                        [&](std::int32_t t) { return t == (chosen ? 'b' : 'a'); }));
      blend->window_part(s, i, 33, 10, 8, part.data());
      CHECK(std::equal(part.begin(), part.end(), w.begin() + 10));
    }
  CHECK(from_b > 20);
  CHECK(from_b < 100);
  CHECK_THAT(blend->describe(), Contains("a blend of 2: 70.0% " + a) && Contains("30.0% " + b));
  CHECK(blend->stored_bytes() == 800);

  // One file, any weight: the file's own windows.
  const std::string text = find_public_domain_text();
  const auto one = make_token_source("2:" + text, 256, 9, 64);
  const auto alone = make_token_source(text, 256, 9, 64);
  for (int s = 0; s < 5; ++s) {
    std::vector<std::int32_t> x(65), y(65);
    one->sequence(s, s + 1, 65, x.data());
    alone->sequence(s, s + 1, 65, y.data());
    CHECK(x == y);
  }
}

TEST_CASE("a blend's bad items are errors naming the item", "[data]") {
  const test::TempDir tmp("gdn_test_blend_bad");
  const std::string a = tmp / "a.txt";
  std::ofstream(a) << std::string(300, 'a');
  CHECK_FALSE(is_blend(a));
  CHECK_FALSE(is_blend("synthetic"));
  CHECK_FALSE(is_blend("0.5:" + a + ",extra"));  // every item must be W:FILE
  CHECK_THROWS_WITH(
      make_token_source("-1:" + a + ",1:" + a, 256, 1, 8),
      Contains("the weight of '-1:" + a + "' is -1") && Contains("expected a number >= 0"));
  CHECK_THROWS_WITH(make_token_source("0:" + a + ",0:" + a, 256, 1, 8),
                    Contains("every weight is 0"));
  CHECK_THROWS_WITH(make_token_source("1:" + a + ",1:" + (tmp / "none.txt"), 256, 1, 8),
                    Contains(tmp / "none.txt"));
  CHECK_THROWS_WITH(make_token_source("1:synthetic", 256, 1, 8), Contains("cannot be blended"));
}
