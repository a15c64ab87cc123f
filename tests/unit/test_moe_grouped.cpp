// The device-side MoE routing and the grouped expert linears (ops/moe_route,
// ops/grouped_linear) on the host against plain loops and the per-expert ops they replace
// (bit for bit: the CPU model's numbers do not move), and the CUDA grouped GEMM's tile
// schedule and index math (grouped_tiles.h) run on the CPU: every routed row covered once,
// no tile across an expert boundary, and the tiles, computed by the emulated bf16 block
// GEMM (mma_emulation.h) or a plain fp64 loop, giving the host's grouped linear.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/precision.h"
#include "core/rng.h"
#include "expert_ids.h"
#include "mma_emulation.h"
#include "ops/grouped_linear/grouped_linear.h"
#include "ops/grouped_linear/grouped_problems.h"
#include "ops/grouped_linear/grouped_tiles.h"
#include "ops/linear/linear.h"
#include "ops/moe/moe.h"
#include "ops/moe_route/moe_route.h"
#include "test_support.h"

using namespace gdn;
using gdn::test::rel_l2;
using i64 = std::int64_t;

namespace {

template <typename T>
std::vector<T> random_vec(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<T> v(n);
  for (T& x : v) x = T(rng.normal());
  return v;
}

struct Routing {
  std::vector<i64> offsets, rows, choice, slot;
};

Routing route(const std::vector<std::int32_t>& idx, i64 N, int k, int E) {
  Routing r{std::vector<i64>(std::size_t(E) + 1), std::vector<i64>(idx.size()),
            std::vector<i64>(idx.size()), std::vector<i64>(idx.size())};
  ops::moe_route(Host{}, idx.data(), N, k, E, r.offsets.data(), r.rows.data(), r.choice.data(),
                 r.slot.data());
  return r;
}

// Offsets of E experts with the given row counts.
std::vector<i64> offsets_of(const std::vector<i64>& counts) {
  std::vector<i64> o{0};
  for (i64 c : counts) o.push_back(o.back() + c);
  return o;
}

}  // namespace

TEST_CASE("moe_route groups the entries by expert, tokens in order", "[moe]") {
  // (N, k, E, experts used): no tokens, one expert, k > 1, empty experts, k = E.
  for (auto [N, k, E, used] :
       {std::tuple{0, 2, 5, 5}, std::tuple{3, 1, 1, 1}, std::tuple{40, 2, 5, 5},
        std::tuple{37, 3, 9, 6}, std::tuple{100, 1, 16, 3}, std::tuple{20, 4, 4, 4}}) {
    INFO("N " << N << " k " << k << " E " << E << " used " << used);
    const std::vector<std::int32_t> idx = test::random_expert_ids(N, k, used, 7 + N);
    const Routing got = route(idx, N, k, E);
    // Directly: each expert in turn, the entries that chose it in entry order.
    Routing want;
    want.offsets.push_back(0);
    want.slot.assign(idx.size(), -1);
    for (int e = 0; e < E; ++e) {
      for (i64 i = 0; i < N * k; ++i)
        if (idx[std::size_t(i)] == e) {
          want.slot[std::size_t(i)] = i64(want.rows.size());
          want.rows.push_back(i / k);
          want.choice.push_back(i);
        }
      want.offsets.push_back(i64(want.rows.size()));
    }
    CHECK(got.offsets == want.offsets);
    CHECK(got.rows == want.rows);
    CHECK(got.choice == want.choice);
    CHECK(got.slot == want.slot);
  }
}

TEST_CASE("moe_route names an expert out of range", "[moe]") {
  for (std::int32_t bad : {-1, 5}) {
    std::vector<std::int32_t> idx = test::random_expert_ids(6, 2, 5, 3);
    idx[7] = bad;
    CHECK_THROWS_AS(route(idx, 6, 2, 5), Error);
  }
}

TEMPLATE_TEST_CASE("moe_combine adds a token's rows in expert order, as the per-expert scatter",
                   "[moe]", float, double) {
  using T = TestType;
  const i64 N = 23;
  const int k = 3, E = 7, d = 11;
  const std::vector<std::int32_t> idx = test::random_expert_ids(N, k, E, 5);
  const Routing r = route(idx, N, k, E);
  const auto src = random_vec<T>(std::size_t(N * k * d), 6), scale = random_vec<T>(idx.size(), 7);
  const auto y0 = random_vec<T>(std::size_t(N * d), 8);
  for (bool scaled : {false, true}) {
    INFO("scaled " << scaled);
    // The loop MoeMlp ran: one scatter_add_rows per expert, experts in order.
    std::vector<T> want = y0, got = y0;
    for (int e = 0; e < E; ++e) {
      const i64 o = r.offsets[std::size_t(e)], n = r.offsets[std::size_t(e) + 1] - o;
      ops::scatter_add_rows(Host{}, src.data() + o * d, r.rows.data() + o,
                            scaled ? scale.data() + o : nullptr, n, d, want.data());
    }
    ops::moe_combine(Host{}, src.data(), r.slot.data(), scaled ? scale.data() : nullptr, N, k, d,
                     got.data());
    CHECK(got == want);
    CHECK(got != y0);
  }
}

TEMPLATE_TEST_CASE("router_stats counts the choices and sums the probabilities in token order",
                   "[moe]", float, double) {
  using T = TestType;
  const i64 N = 31;
  const int k = 2, E = 6;
  const std::vector<std::int32_t> idx =
      test::random_expert_ids(N, k, E - 1, 9);  // the last expert unused
  const Routing r = route(idx, N, k, E);
  const auto probs = random_vec<T>(std::size_t(N * E), 10);
  std::vector<double> stats(std::size_t(2 * E), -1.0);
  ops::router_stats(Host{}, probs.data(), r.offsets.data(), N, E, stats.data());
  for (int e = 0; e < E; ++e) {
    INFO("expert " << e);
    double sum = 0;
    for (i64 n = 0; n < N; ++n) sum += double(probs[std::size_t(n * E + e)]);
    CHECK(stats[std::size_t(e)] == double(std::count(idx.begin(), idx.end(), e)));
    CHECK(stats[std::size_t(E + e)] == sum);
  }
  CHECK(stats[std::size_t(E - 1)] == 0.0);
}

namespace {

// The grouped linear against one linear op per expert on copies of its rows.
template <typename T>
void check_host_grouped(bool bf16) {
  const Precision mode = precision_of(bf16);
  const int in = 19, out = 13, E = 6;
  const std::vector<i64> offsets = offsets_of({5, 0, 25, 1, 0, 16});
  const i64 R = offsets.back(), stride = 2 * i64(out) * in;  // a slice of a fused weight
  const auto x = random_vec<T>(std::size_t(R * in), 1), dy = random_vec<T>(std::size_t(R * out), 2);
  const auto W = random_vec<T>(std::size_t(E * stride), 3);
  const auto dW0 = random_vec<T>(W.size(), 4);
  std::vector<T> y(std::size_t(R * out)), dx(x.size()), dW = dW0;
  ops::grouped_linear_forward(Host{}, mode, x.data(), W.data() + out * in, stride, offsets.data(),
                              E, R, in, out, y.data());
  ops::grouped_linear_backward(Host{}, mode, x.data(), W.data() + out * in, stride, dy.data(),
                               offsets.data(), E, R, in, out, dx.data(), dW.data() + out * in);
  std::vector<T> want_y(y.size()), want_dx(dx.size()), want_dW = dW0;
  for (int e = 0; e < E; ++e) {
    const i64 o = offsets[std::size_t(e)], n = offsets[std::size_t(e) + 1] - o;
    if (n == 0) continue;
    const std::vector<T> xe(x.begin() + o * in, x.begin() + (o + n) * in),
        dye(dy.begin() + o * out, dy.begin() + (o + n) * out);
    const T* We = W.data() + e * stride + out * in;
    ops::linear_forward(Host{}, mode, xe.data(), We, n, in, out, want_y.data() + o * out);
    ops::linear_backward(Host{}, mode, xe.data(), We, dye.data(), n, in, out,
                         want_dx.data() + o * in, want_dW.data() + e * stride + out * in);
  }
  CHECK(y == want_y);
  CHECK(dx == want_dx);
  CHECK(dW == want_dW);
  CHECK(dW != dW0);
  // Null gradients are skipped.
  std::vector<T> dx2(dx.size()), dW2 = dW0;
  ops::grouped_linear_backward(Host{}, mode, x.data(), W.data() + out * in, stride, dy.data(),
                               offsets.data(), E, R, in, out, dx2.data(), static_cast<T*>(nullptr));
  ops::grouped_linear_backward(Host{}, mode, x.data(), W.data() + out * in, stride, dy.data(),
                               offsets.data(), E, R, in, out, static_cast<T*>(nullptr),
                               dW2.data() + out * in);
  CHECK(dx2 == want_dx);
  CHECK(dW2 == want_dW);
  // accumulate adds dy W_e to dx: the bits of dx0 + (dy W_e), one rounding each.
  const std::vector<T> dx0 = random_vec<T>(dx.size(), 5);
  std::vector<T> dx3 = dx0;
  ops::grouped_linear_backward(Host{}, mode, x.data(), W.data() + out * in, stride, dy.data(),
                               offsets.data(), E, R, in, out, dx3.data(), static_cast<T*>(nullptr),
                               /*accumulate=*/true);
  for (std::size_t i = 0; i < dx3.size(); ++i) REQUIRE(dx3[i] == dx0[i] + want_dx[i]);
}

}  // namespace

TEST_CASE("the grouped linear on the host is the per-expert linear, bit for bit", "[moe]") {
  check_host_grouped<double>(false);
  check_host_grouped<float>(false);
  check_host_grouped<float>(true);  // bf16 operands, fp32 sums
  // Offsets that do not span the rows are refused.
  const std::vector<i64> bad = {0, 4, 3};
  std::vector<double> x(8), W(4), y(8);
  CHECK_THROWS_AS(ops::grouped_linear_forward(Host{}, Precision::plain, x.data(), W.data(), 2,
                                              bad.data(), 2, 3, 2, 1, y.data()),
                  Error);
}

TEST_CASE("the grouped GEMM's tile schedule covers each routed row once, inside its expert",
          "[moe]") {
  Rng rng(17);
  std::vector<i64> many;  // 300 experts, a third empty, up to 150 rows
  for (int e = 0; e < 300; ++e) many.push_back(e % 3 == 0 ? 0 : i64(rng.next_u64() % 151));
  for (const std::vector<i64>& counts :
       {std::vector<i64>{0}, std::vector<i64>{64}, std::vector<i64>{63, 1, 0, 0, 136},
        std::vector<i64>{0, 0, 0, 0, 0}, std::vector<i64>{0, 0, 0, 1000}, many}) {
    const std::vector<i64> offsets = offsets_of(counts);
    const int E = int(counts.size());
    const i64 R = offsets.back();
    INFO("E " << E << " R " << R);
    std::vector<int> covered(std::size_t(R), 0);
    i64 spare = 0;
    for (i64 t = 0; t < grouped::num_row_tiles(R, E); ++t) {
      const grouped::RowTile tile = grouped::row_tile(t, offsets.data(), E);
      REQUIRE((tile.expert >= 0 && tile.expert < E));
      if (tile.rows == 0) {
        ++spare;
        continue;
      }
      INFO("tile " << t << " expert " << tile.expert << " rows " << tile.row0 << " + "
                   << tile.rows);
      REQUIRE(tile.rows <= grouped::kTileRows);
      REQUIRE(tile.row0 >= offsets[std::size_t(tile.expert)]);
      REQUIRE(tile.row0 + tile.rows <= offsets[std::size_t(tile.expert) + 1]);
      CHECK((tile.row0 - offsets[std::size_t(tile.expert)]) % grouped::kTileRows == 0);
      for (i64 r = tile.row0; r < tile.row0 + tile.rows; ++r) ++covered[std::size_t(r)];
    }
    CHECK(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }));
    CHECK(spare <= E);  // at most one spare tile per expert
  }
}

namespace {

// One block's tile on the CPU: the bf16 block GEMM emulated lane by lane (float), or the
// SIMT tile's sum in k order (double).
void run_tile(const grouped::TileGemm<float>& g) {
  test::emulated_block_gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, g.A, g.lda, g.B, g.ldb,
                            g.accumulate ? 1.0f : 0.0f, g.C, g.ldc);
}
void run_tile(const grouped::TileGemm<double>& g) {
  for (int i = 0; i < g.m; ++i)
    for (int j = 0; j < g.n; ++j) {
      double acc = 0;
      for (int p = 0; p < g.k; ++p)
        acc += (g.ta ? g.A[i64(p) * g.lda + i] : g.A[i64(i) * g.lda + p]) *
               (g.tb ? g.B[i64(j) * g.ldb + p] : g.B[i64(p) * g.ldb + j]);
      double& c = g.C[i64(i) * g.ldc + j];
      c = g.accumulate ? c + acc : acc;
    }
}

// Every block of the three CUDA launches of grouped_linear_cuda.cu, through
// grouped_tiles.h, against the host's grouped linear. Outputs start as NaN: a row or column
// no tile writes fails the comparison.
template <typename T>
void check_emulated_kernels(double tol) {
  const bool bf16 = std::is_same_v<T, float>;
  const Precision mode = precision_of(bf16);
  const int in = 70, out = 130, E = 5;  // three column tiles of out, two of in
  const std::vector<i64> offsets = offsets_of({150, 0, 3, 64, 0});
  const i64 R = offsets.back(), stride = i64(out) * in;
  const auto x = random_vec<T>(std::size_t(R * in), 21),
             dy = random_vec<T>(std::size_t(R * out), 22);
  const auto W = random_vec<T>(std::size_t(E * stride), 23), dW0 = random_vec<T>(W.size(), 24);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> y(std::size_t(R * out), nan), dx(x.size(), nan), dW = dW0;
  for (i64 bx = 0; bx < grouped::num_row_tiles(R, E); ++bx) {
    for (int by = 0; by < grouped::col_tiles(out); ++by) {
      const auto g = grouped::rows_tile(bx, by, x.data(), W.data(), stride, offsets.data(), E, in,
                                        out, true, y.data());
      if (g.m > 0) run_tile(g);
    }
    for (int by = 0; by < grouped::col_tiles(in); ++by) {
      const auto g = grouped::rows_tile(bx, by, dy.data(), W.data(), stride, offsets.data(), E, out,
                                        in, false, dx.data());
      if (g.m > 0) run_tile(g);
    }
  }
  for (int e = 0; e < E; ++e)
    for (int bx = 0; bx < grouped::col_tiles(out) * grouped::col_tiles(in); ++bx) {
      const auto g =
          grouped::dw_tile(bx, e, x.data(), dy.data(), offsets.data(), in, out, stride, dW.data());
      if (g.m > 0) run_tile(g);
    }
  // The row tiles with accumulate: dx0 + each tile's sums, the bits of dx0 + dx.
  const std::vector<T> dx0 = random_vec<T>(dx.size(), 25);
  std::vector<T> dx_acc = dx0;
  for (i64 bx = 0; bx < grouped::num_row_tiles(R, E); ++bx)
    for (int by = 0; by < grouped::col_tiles(in); ++by) {
      const auto g = grouped::rows_tile(bx, by, dy.data(), W.data(), stride, offsets.data(), E, out,
                                        in, false, dx_acc.data(), /*accumulate=*/true);
      if (g.m > 0) run_tile(g);
    }
  for (std::size_t i = 0; i < dx.size(); ++i) REQUIRE(dx_acc[i] == dx0[i] + dx[i]);
  std::vector<T> want_y(y.size()), want_dx(dx.size()), want_dW = dW0;
  ops::grouped_linear_forward(Host{}, mode, x.data(), W.data(), stride, offsets.data(), E, R, in,
                              out, want_y.data());
  ops::grouped_linear_backward(Host{}, mode, x.data(), W.data(), stride, dy.data(), offsets.data(),
                               E, R, in, out, want_dx.data(), want_dW.data());
  CHECK(rel_l2(y.data(), want_y.data(), y.size()) <= tol);
  CHECK(rel_l2(dx.data(), want_dx.data(), dx.size()) <= tol);
  CHECK(rel_l2(dW.data(), want_dW.data(), dW.size()) <= tol);
  // The empty experts' weight gradients are untouched.
  for (int e : {1, 4})
    CHECK(std::equal(dW.begin() + e * stride, dW.begin() + (e + 1) * stride,
                     dW0.begin() + e * stride));
}

}  // namespace

TEST_CASE("the grouped GEMM kernels' tiles, run on the CPU, give the host's grouped linear",
          "[moe]") {
  SECTION("fp64 SIMT tiles") {
    check_emulated_kernels<double>(1e-14);
  }
  // bf16 operands on both sides; only the fp32 summation order differs.
  SECTION("bf16 tensor-core tiles, emulated") {
    check_emulated_kernels<float>(1e-6);
  }
}

namespace {

// C = op(A) op(B), column-major, as BLAS defines it: cuBLAS's contract for each problem.
void blas_gemm(const ops::grouped_gemm::Problem& p, const double* A, const double* B, double* C) {
  for (int i = 0; i < p.m; ++i)
    for (int j = 0; j < p.n; ++j) {
      double acc = 0;
      for (int q = 0; q < p.k; ++q)
        acc += (p.ta ? A[i64(i) * p.lda + q] : A[i64(q) * p.lda + i]) *
               (p.tb ? B[i64(q) * p.ldb + j] : B[i64(j) * p.ldb + q]);
      C[i64(j) * p.ldc + i] = acc;
    }
}

}  // namespace

TEST_CASE("the cuBLAS grouped GEMM's problems give the host's grouped linear", "[moe]") {
  using ops::grouped_gemm::Pass;
  // Gate and up interleaved per expert (w_stride = 2 out in), as MoeMlp lays them out.
  const int in = 24, out = 40, E = 5;
  const std::vector<i64> offsets = offsets_of({7, 0, 1, 12, 0});
  const i64 R = offsets.back(), stride = 2 * i64(out) * in;
  const auto x = random_vec<double>(std::size_t(R * in), 31),
             dy = random_vec<double>(std::size_t(R * out), 32);
  const auto W = random_vec<double>(std::size_t(E * stride), 33),
             dW0 = random_vec<double>(W.size(), 34);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Outputs start as NaN: a row no problem writes fails the comparison. The library's dW
  // products land in zeros and are added to dW (grouped_library.cu).
  std::vector<double> y(std::size_t(R * out), nan), dx(x.size(), nan), dW_part(W.size(), 0.0);
  const auto run = [&](Pass pass, const double* A, const double* B, double* C) {
    const auto ps = ops::grouped_gemm::problems(pass, offsets.data(), E, stride, in, out);
    CHECK(ps.size() == 3);  // the experts with rows
    for (const auto& p : ps) blas_gemm(p, A + p.a, B + p.b, C + p.c);
  };
  run(Pass::forward, W.data(), x.data(), y.data());
  run(Pass::dx, W.data(), dy.data(), dx.data());
  run(Pass::dw, x.data(), dy.data(), dW_part.data());
  std::vector<double> dW = dW0;
  for (std::size_t i = 0; i < dW.size(); ++i) dW[i] += dW_part[i];

  std::vector<double> want_y(y.size()), want_dx(dx.size()), want_dW = dW0;
  ops::grouped_linear_forward(Host{}, Precision::plain, x.data(), W.data(), stride, offsets.data(),
                              E, R, in, out, want_y.data());
  ops::grouped_linear_backward(Host{}, Precision::plain, x.data(), W.data(), stride, dy.data(),
                               offsets.data(), E, R, in, out, want_dx.data(), want_dW.data());
  CHECK(rel_l2(y.data(), want_y.data(), y.size()) <= 1e-14);
  CHECK(rel_l2(dx.data(), want_dx.data(), dx.size()) <= 1e-14);
  CHECK(rel_l2(dW.data(), want_dW.data(), dW.size()) <= 1e-14);
  // Nothing written outside the experts' own blocks (the up rows between the gate blocks).
  for (int e = 0; e < E; ++e)
    CHECK(std::all_of(dW_part.begin() + e * stride + i64(out) * in,
                      dW_part.begin() + (e + 1) * stride, [](double v) { return v == 0.0; }));
}
