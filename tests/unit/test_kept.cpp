// Kept (ops/convert/kept.h): what the backward reads and the memory held, in and out of the bf16
// mode. The expected values are round_bf16 of what the forward wrote (core/bf16.h, tested
// against torch's rounding in test_bf16), not Kept's own conversion.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/precision.h"
#include "core/rng.h"
#include "ops/convert/kept.h"

using namespace gdn;

namespace {

template <typename T>
std::vector<T> random_values(std::int64_t n) {
  Rng rng(9);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& x : v) x = T(rng.normal() * 3);
  return v;
}

}  // namespace

TEST_CASE("Kept in the bf16 mode holds bf16 after seal and gives back the rounded values",
          "[kept]") {
  const std::int64_t n = 1001;
  const std::vector<float> x = random_values<float>(n);
  Kept<float, Host> k;
  float* w = k.open(n, Precision::bf16);
  std::copy(x.begin(), x.end(), w);
  CHECK(k.bf16());
  CHECK(k.values()[7] == x[7]);  // the forward reads what it wrote, unrounded
  k.seal();
  CHECK(k.bytes() == 2 * n);  // the float buffer is gone
  const float* v = k.view();
  CHECK(k.bytes() == 6 * n);  // the decoded copy beside the bf16
  int rounded = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    REQUIRE(v[i] == round_bf16(x[std::size_t(i)]));
    rounded += v[i] != x[std::size_t(i)];
  }
  CHECK(rounded > n / 2);  // the values really went through bf16
  // release_view frees only the decoded copy: a second view decodes the same values.
  k.release_view();
  CHECK(k.bytes() == 2 * n);
  const float* again = k.view();
  CHECK(k.bytes() == 6 * n);
  CHECK(again[n - 1] == round_bf16(x[std::size_t(n - 1)]));
  k.clear();
  CHECK(k.bytes() == 0);
}

TEST_CASE("Kept::for_blocks hands the rounded values over in order, a block at a time", "[kept]") {
  const std::int64_t n = 1001;
  const std::vector<float> x = random_values<float>(n);
  for (bool bf16 : {true, false}) {
    INFO((bf16 ? "bf16 mode" : "float mode"));
    Kept<float, Host> k;
    std::copy(x.begin(), x.end(), k.open(n, precision_of(bf16)));
    k.seal();
    std::vector<float> got;
    std::vector<std::int64_t> firsts;
    k.for_blocks(100, [&](const float* v, std::int64_t first, std::int64_t count) {
      CHECK(first == std::int64_t(got.size()));
      CHECK(count <= (bf16 ? 100 : n));
      firsts.push_back(first);
      got.insert(got.end(), v, v + count);
    });
    REQUIRE(got.size() == std::size_t(n));
    CHECK(firsts.size() == (bf16 ? 11u : 1u));  // the float buffer in one call
    for (std::int64_t i = 0; i < n; ++i)
      REQUIRE(got[std::size_t(i)] == (bf16 ? round_bf16(x[std::size_t(i)]) : x[std::size_t(i)]));
    CHECK(k.bytes() == (bf16 ? 2 : 4) * n);  // no decoded copy left behind
  }
}

TEST_CASE("Kept outside the bf16 mode, and for double, keeps the forward's buffer", "[kept]") {
  const std::int64_t n = 257;
  auto check = [&](auto zero, Precision p) {
    using T = decltype(zero);
    INFO((sizeof(T) == 4 ? "float" : "double") << (p == Precision::bf16 ? ", bf16 mode" : ""));
    const std::vector<T> x = random_values<T>(n);
    Kept<T, Host> k;
    T* w = k.open(n, p);
    std::copy(x.begin(), x.end(), w);
    k.seal();
    CHECK_FALSE(k.bf16());
    CHECK(k.view() == w);  // no copy
    k.release_view();      // nothing to free: the view is the kept buffer
    CHECK(k.view() == w);
    CHECK(k.bytes() == std::int64_t(sizeof(T)) * n);
    CHECK(std::vector<T>(k.view(), k.view() + n) == x);
  };
  check(0.0f, Precision::plain);
  check(0.0, Precision::plain);
  check(0.0, Precision::bf16);
}

TEST_CASE("Kept's float copies in the bf16 mode are fresh pages, returned when freed", "[kept]") {
  // A layer-sized float copy (the forward's values, the backward's decoded ones) is a
  // mapping of its own, so freeing it leaves no hole in the heap (ops/convert/kept.h).
  const std::int64_t n = std::int64_t(FreshPages<float>::kMapBytes / sizeof(float)) + 5;
  const std::vector<float> x = random_values<float>(n);
  Kept<float, Host> k;
  float* w = k.open(n, Precision::bf16);
  CHECK(reinterpret_cast<std::uintptr_t>(w) % 4096 == 0);  // a mapping's start, not the heap's
  CHECK(std::all_of(w, w + n, [](float v) { return v == 0.0f; }));  // zero, as Buffer's
  std::copy(x.begin(), x.end(), w);
  k.seal();
  CHECK(k.bytes() == 2 * n);
  const float* v = k.view();
  CHECK(reinterpret_cast<std::uintptr_t>(v) % 4096 == 0);
  CHECK(v[n - 1] == round_bf16(x[std::size_t(n - 1)]));
  k.clear();
  CHECK(k.bytes() == 0);
  // Small ones stay on the heap; moves hand the storage over.
  FreshPages<float> small, big;
  small.resize(3);
  big.resize(std::size_t(n));
  big.data()[0] = 1.0f;
  FreshPages<float> moved(std::move(big));
  CHECK(moved.size() == std::size_t(n));
  CHECK(moved.data()[0] == 1.0f);
  CHECK(big.size() == 0);
  CHECK(small.size() == 3);
  small = std::move(moved);
  CHECK(small.size() == std::size_t(n));
}
