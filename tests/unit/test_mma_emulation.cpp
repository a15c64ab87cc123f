// The bf16 tensor-core GEMM of the GPU (ops/mma/mma_bf16.cuh), run on the CPU lane by lane
// around an mma emulated from the PTX ISA's fragment tables (mma_emulation.h). With
// small-integer inputs every product and sum is exact in bf16 and fp32, so the emulated
// block GEMM must equal the plain product bit for bit, whatever the transpositions, shapes
// (tiles cut at every edge), structure hints, alpha and beta.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "mma_emulation.h"

using namespace gdn;
using namespace gdn::test;

namespace {

struct Case {
  bool ta, tb;
  int m, n, k;
};

// op(A)(i, p) with A stored as given (ta: A is k x m).
double op(const std::vector<float>& X, bool t, int rows, int cols, int i, int p) {
  return t ? X[std::size_t(p) * rows + i] : X[std::size_t(i) * cols + p];
}

std::vector<float> integers(std::size_t n, Rng& rng, int range) {
  std::vector<float> x(n);
  for (float& e : x) e = float(std::floor(rng.uniform() * (2 * range + 1)) - range);
  return x;
}

}  // namespace

TEST_CASE("The emulated bf16 block GEMM equals the plain product on exact inputs", "[mma]") {
  Rng rng(5);
  const std::vector<Case> cases = {{false, false, 64, 64, 32},  {true, false, 100, 37, 50},
                                   {false, true, 16, 128, 64},  {true, true, 65, 70, 33},
                                   {false, false, 1, 1, 1},     {false, true, 128, 8, 200},
                                   {true, false, 64, 128, 128}, {false, false, 37, 200, 17}};
  for (const Case& c : cases)
    for (float beta : {0.0f, 1.0f, -2.0f}) {
      INFO("ta=" << c.ta << " tb=" << c.tb << " m=" << c.m << " n=" << c.n << " k=" << c.k
                 << " beta=" << beta);
      const auto A = integers(std::size_t(c.m) * c.k, rng, 7);
      const auto B = integers(std::size_t(c.k) * c.n, rng, 7);
      auto C = integers(std::size_t(c.m) * c.n, rng, 50);
      std::vector<double> want(C.size());
      for (int i = 0; i < c.m; ++i)
        for (int j = 0; j < c.n; ++j) {
          double s = 0;
          for (int p = 0; p < c.k; ++p)
            s += op(A, c.ta, c.m, c.k, i, p) * op(B, c.tb, c.k, c.n, p, j);
          want[std::size_t(i) * c.n + j] = beta * C[std::size_t(i) * c.n + j] + 2 * s;
        }
      emulated_block_gemm(c.ta, c.tb, c.m, c.n, c.k, 2.0f, A.data(), c.ta ? c.m : c.k, B.data(),
                          c.tb ? c.k : c.n, beta, C.data(), c.n);
      int wrong = 0;
      for (std::size_t x = 0; x < C.size(); ++x) wrong += double(C[x]) != want[x];
      CHECK(wrong == 0);
    }
}

TEST_CASE("The bf16 block GEMM honours the structure hints", "[mma]") {
  Rng rng(6);
  const int m = 130, k = 130, n = 96;
  // kLowerA: op(A) lower triangular, so the k range stops at the tile's last row; kUpperA:
  // upper triangular, it starts at the tile's first row. kLowerC: only i >= j is wanted.
  for (Structure s : {Structure::kLowerA, Structure::kUpperA, Structure::kLowerC}) {
    auto A = integers(std::size_t(m) * k, rng, 5);
    const auto B = integers(std::size_t(k) * n, rng, 5);
    for (int i = 0; i < m; ++i)
      for (int p = 0; p < k; ++p)
        if ((s == Structure::kLowerA && p > i) || (s == Structure::kUpperA && p < i))
          A[std::size_t(i) * k + p] = 0;
    std::vector<float> C(std::size_t(m) * n, 0.0f);
    emulated_block_gemm(false, false, m, n, k, 1.0f, A.data(), k, B.data(), n, 0.0f, C.data(), n,
                        s);
    int wrong = 0;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        if (s == Structure::kLowerC && j > i) continue;
        double want = 0;
        for (int p = 0; p < k; ++p)
          want += double(A[std::size_t(i) * k + p]) * B[std::size_t(p) * n + j];
        wrong += double(C[std::size_t(i) * n + j]) != want;
      }
    CHECK(wrong == 0);
  }
}

TEST_CASE("The bf16 block GEMM rounds each operand to bf16 once, sums in fp32", "[mma]") {
  Rng rng(7);
  const int m = 70, n = 90, k = 300;
  std::vector<float> A(std::size_t(m) * k), B(std::size_t(k) * n), C(std::size_t(m) * n);
  for (float& e : A) e = float(rng.normal());
  for (float& e : B) e = float(rng.normal());
  emulated_block_gemm(false, false, m, n, k, 1.0f, A.data(), k, B.data(), n, 0.0f, C.data(), n);
  // Against the exact product of the rounded operands, the error is the fp32 sums' alone
  // (k = 300 terms of size ~1: a few ulps of sqrt(k)); against the unrounded operands it is
  // bf16's 2^-9 per operand, ~2^-9 sqrt(2k) in all.
  double worst_rounded = 0, worst_raw = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double rounded = 0, raw = 0;
      for (int p = 0; p < k; ++p) {
        const float a = A[std::size_t(i) * k + p], b = B[std::size_t(p) * n + j];
        rounded += double(to_float(to_bf16(a))) * to_float(to_bf16(b));
        raw += double(a) * b;
      }
      worst_rounded = std::max(worst_rounded, std::abs(C[std::size_t(i) * n + j] - rounded));
      worst_raw = std::max(worst_raw, std::abs(C[std::size_t(i) * n + j] - raw));
    }
  CHECK(worst_rounded < 2e-5);
  CHECK(worst_raw > 1e-3);  // bf16 rounding happened
  CHECK(worst_raw < 0.25);
}

TEST_CASE("c_pair_to_a turns two product tiles into the next mma's A operand", "[mma]") {
  // D1 = X Y (16 x 16, as two 16 x 8 tiles), then D2 = D1 Z: the flash attention P V
  // pattern, with D1 fed from registers.
  Rng rng(8);
  const auto X = integers(16 * 16, rng, 3), Y = integers(16 * 16, rng, 3);
  const auto Z = integers(16 * 8, rng, 3);
  mma::FragA x[32];
  mma::FragB y[2][32], z[32];
  for (int lane = 0; lane < 32; ++lane) {
    x[lane] = mma::load_a(lane, [&](int i, int p) { return X[std::size_t(i) * 16 + p]; });
    for (int h = 0; h < 2; ++h)
      y[h][lane] =
          mma::load_b(lane, [&](int p, int j) { return Y[std::size_t(p) * 16 + 8 * h + j]; });
    z[lane] = mma::load_b(lane, [&](int p, int j) { return Z[std::size_t(p) * 8 + j]; });
  }
  mma::FragC d1[2][32], d2[32];
  for (int h = 0; h < 2; ++h) emulate_mma(d1[h], x, y[h]);
  mma::FragA p[32];
  for (int lane = 0; lane < 32; ++lane) p[lane] = mma::c_pair_to_a(d1[0][lane], d1[1][lane]);
  emulate_mma(d2, p, z);
  int wrong = 0;
  for (int lane = 0; lane < 32; ++lane)
    mma::store_c(lane, d2[lane], [&](int i, int j, float v) {
      double want = 0;
      for (int q = 0; q < 16; ++q) {
        double xy = 0;
        for (int r = 0; r < 16; ++r) xy += X[std::size_t(i) * 16 + r] * Y[std::size_t(r) * 16 + q];
        want += xy * Z[std::size_t(q) * 8 + j];  // |xy| <= 144: exact in bf16? see below
      }
      wrong += double(v) != want;
    });
  // Entries of X Y reach 16 * 9 = 144, exact in bf16 (8 significant bits); the sums of 16
  // products of size <= 432 stay exact in fp32.
  CHECK(wrong == 0);
}
