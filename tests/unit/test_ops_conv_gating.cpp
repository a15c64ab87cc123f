// Tests src/ops/conv and src/ops/gating (the GDN mixer's causal conv and gates) on the
// host: by hand, against finite differences, the overwrite / accumulate conventions.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/conv/conv.h"
#include "ops/gating/gating.h"
#include "ops_support.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

// ---------------------------------------------------------------------------------------
// Causal depthwise conv + SiLU

TEST_CASE("causal conv forward by hand (W = 2)", "[layers]") {
  // One channel, T = 2, one halo row: x = [1 | 2, 3], w = [0.5 (previous), 2 (current)].
  const Vec x = {1, 2, 3}, w = {0.5, 2};
  Vec y(2);
  ops::causal_conv_silu_forward(Host{}, x.data(), w.data(), 1, 2, 1, 2, y.data());
  // silu(0.5 * 1 + 2 * 2) = silu(4.5), silu(0.5 * 2 + 2 * 3) = silu(7).
  check_close(y, {4.45055875816233, 6.993622641639195}, 1e-14);
}

TEST_CASE("causal conv backward matches finite differences, halo rows included", "[layers]") {
  const int B = 2, C = 3, W = 4;
  const std::int64_t T = 6, rows = T + W - 1;
  Vec x = rand_vec(B * rows * C, 23), w = rand_vec(C * W, 24, 0.5), r = rand_vec(B * T * C, 25);
  auto loss = [&] {
    Vec y(B * T * C);
    ops::causal_conv_silu_forward(Host{}, x.data(), w.data(), B, T, C, W, y.data());
    return dot(y, r);
  };
  Vec dx(B * rows * C, 123.0), dw(C * W, 0.0);
  ops::causal_conv_silu_backward(Host{}, x.data(), w.data(), r.data(), B, T, C, W, dx.data(),
                                 dw.data());
  check_grad("dx", dx, x, loss);
  check_grad("dw", dw, w, loss);
  // The halo's gradient is real: its first W - 1 rows are not all zero.
  double halo = 0;
  for (std::int64_t i = 0; i < (W - 1) * C; ++i) halo += std::abs(dx[i]);
  CHECK(halo > 0);

  Vec dx2(B * rows * C, -5.0), dw2 = dw;
  ops::causal_conv_silu_backward(Host{}, x.data(), w.data(), r.data(), B, T, C, W, dx2.data(),
                                 dw2.data());
  CHECK(dx2 == dx);
  for (int i = 0; i < C * W; ++i) CHECK(dw2[i] == 2 * dw[i]);
}

TEST_CASE("causal conv with document positions leaves out the taps before a document", "[layers]") {
  // A shard of T = 9 tokens whose first document continues from the halo (positions 4..5),
  // then documents of 1, 2 and 5 tokens; W = 4. The reference sums the taps inside the
  // document only; the backward against finite differences of that forward.
  const int B = 1, C = 3, W = 4;
  const std::int64_t T = 9, rows = T + W - 1;
  const std::vector<std::int64_t> pos = {4, 5, 0, 0, 1, 0, 1, 2, 3};
  Vec x = rand_vec(B * rows * C, 31), w = rand_vec(C * W, 32, 0.5), r = rand_vec(B * T * C, 33);
  Vec y(B * T * C), want(B * T * C);
  ops::causal_conv_silu_forward(Host{}, x.data(), w.data(), B, T, C, W, y.data(), pos.data());
  for (std::int64_t t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) {
      double pre = 0;
      for (int j = 0; j < W; ++j)
        if (W - 1 - j <= pos[std::size_t(t)]) pre += w[c * W + j] * x[(t + j) * C + c];
      want[t * C + c] = pre / (1 + std::exp(-pre));
    }
  check_close(y, want, 1e-14);
  auto loss = [&] {
    Vec out(B * T * C);
    ops::causal_conv_silu_forward(Host{}, x.data(), w.data(), B, T, C, W, out.data(), pos.data());
    return dot(out, r);
  };
  Vec dx(B * rows * C, 9.0), dw(C * W, 0.0);
  ops::causal_conv_silu_backward(Host{}, x.data(), w.data(), r.data(), B, T, C, W, dx.data(),
                                 dw.data(), pos.data());
  check_grad("dx", dx, x, loss);
  check_grad("dw", dw, w, loss);
}

// ---------------------------------------------------------------------------------------
// GDN gating

TEST_CASE("gating forward by hand", "[layers]") {
  // Head 0: b = 0, a + dt = 0, A_log = 0; head 1: a + dt = 30 (softplus = x), A_log = ln 2;
  // head 2: a + dt = -30 (softplus = log1p(e^-30)).
  const Vec b = {0, 0, 0}, a = {1, 29, -31}, A_log = {0, std::log(2.0), 0}, dt = {-1, 1, 1};
  Vec beta(3), g(3);
  ops::gdn_gating_forward(Host{}, b.data(), a.data(), A_log.data(), dt.data(), 1, 3, beta.data(),
                          g.data());
  check_close(beta, {0.5, 0.5, 0.5});
  check_close(g, {-0.6931471805599453, -60.0, -9.357622968839737e-14}, 1e-14);
}

TEST_CASE("gating backward matches finite differences", "[layers]") {
  const std::int64_t N = 5;
  const int H = 3;
  Vec b = rand_vec(N * H, 26, 2.0), a = rand_vec(N * H, 27, 2.0), A_log = rand_vec(H, 28, 0.5),
      dt = rand_vec(H, 29, 0.5), rb = rand_vec(N * H, 30), rg = rand_vec(N * H, 31);
  auto loss = [&] {
    Vec beta(N * H), g(N * H);
    ops::gdn_gating_forward(Host{}, b.data(), a.data(), A_log.data(), dt.data(), N, H, beta.data(),
                            g.data());
    return dot(beta, rb) + dot(g, rg);
  };
  Vec db(N * H, 123.0), da(N * H, 123.0), dA(H, 0.0), ddt(H, 0.0);
  ops::gdn_gating_backward(Host{}, b.data(), a.data(), A_log.data(), dt.data(), rb.data(),
                           rg.data(), N, H, db.data(), da.data(), dA.data(), ddt.data());
  check_grad("db", db, b, loss);
  check_grad("da", da, a, loss);
  check_grad("dA_log", dA, A_log, loss);
  check_grad("ddt_bias", ddt, dt, loss);

  Vec db2(N * H, -1.0), da2(N * H, -1.0), dA2 = dA, ddt2 = ddt;
  ops::gdn_gating_backward(Host{}, b.data(), a.data(), A_log.data(), dt.data(), rb.data(),
                           rg.data(), N, H, db2.data(), da2.data(), dA2.data(), ddt2.data());
  CHECK(db2 == db);
  CHECK(da2 == da);
  for (int h = 0; h < H; ++h) {
    CHECK(dA2[h] == 2 * dA[h]);
    CHECK(ddt2[h] == 2 * ddt[h]);
  }
}
