// The per-token ops of src/ops on the host: forward values against hand-computed ones, every
// backward against central finite differences in fp64 (L = sum(y * r) for a fixed random
// r), the overwrite / accumulate conventions, input validation, the blocked GEMM against a
// naive loop, and thread-count independence of the linear layers.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "ops/conv/conv.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/embedding/embedding.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/gating/gating.h"
#include "ops/linear/linear.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "ops/swiglu/swiglu.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;
using Vec = std::vector<double>;

namespace {

Vec rand_vec(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  Vec v(n);
  for (double& x : v) x = scale * rng.normal();
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central differences of loss() with respect to every element of x (test_support.h).
Vec finite_diff(Vec& x, const std::function<double()>& loss, double eps = 1e-6) {
  return finite_differences(x, loss, eps);
}

void check_grad(const char* name, const Vec& analytic, Vec& x,
                const std::function<double()>& loss) {
  const Vec fd = finite_diff(x, loss);
  const double err = rel_l2(analytic.data(), fd.data(), fd.size());
  INFO(name << " rel err " << err);
  CHECK(err <= 1e-7);
}

void check_close(const Vec& got, const Vec& want, double tol = 1e-15) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(tol).margin(tol));
  }
}

// y = x W^T by the textbook triple loop, in double.
Vec naive_linear(const Vec& x, const Vec& W, std::int64_t N, int in, int out) {
  Vec y(std::size_t(N) * out, 0.0);
  for (std::int64_t i = 0; i < N; ++i)
    for (int o = 0; o < out; ++o)
      for (int k = 0; k < in; ++k) y[i * out + o] += x[i * in + k] * W[std::size_t(o) * in + k];
  return y;
}

template <typename T>
std::vector<T> to(const Vec& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Restores the OpenMP thread count when a test changes it.
struct ThreadGuard {
  int saved = omp_get_max_threads();
  ~ThreadGuard() { omp_set_num_threads(saved); }
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Linear

TEST_CASE("linear forward by hand", "[layers]") {
  const Vec x = {1, 2, 3, 4, 5, 6}, W = {1, 0, -1, 2, 1, 0};  // x [2, 3], W [2, 3]
  Vec y(4);
  ops::linear_forward(Host{}, x.data(), W.data(), 2, 3, 2, y.data());
  CHECK(y == Vec{-2, 4, -2, 13});
}

TEST_CASE("linear backward matches finite differences", "[layers]") {
  const std::int64_t N = 5;
  const int in = 7, out = 6;
  Vec x = rand_vec(N * in, 1), W = rand_vec(out * in, 2), r = rand_vec(N * out, 3);
  auto loss = [&] {
    Vec y(N * out);
    ops::linear_forward(Host{}, x.data(), W.data(), N, in, out, y.data());
    return dot(y, r);
  };
  Vec dx(N * in), dW(out * in, 0.0);
  ops::linear_backward(Host{}, x.data(), W.data(), r.data(), N, in, out, dx.data(), dW.data());
  check_grad("dx", dx, x, loss);
  check_grad("dW", dW, W, loss);

  // dx is overwritten, dW accumulates: a second call gives the same dx and exactly 2 dW.
  Vec dx2(N * in, 123.0), dW2 = dW;
  ops::linear_backward(Host{}, x.data(), W.data(), r.data(), N, in, out, dx2.data(), dW2.data());
  CHECK(dx2 == dx);
  for (std::size_t i = 0; i < dW.size(); ++i) CHECK(dW2[i] == 2 * dW[i]);
  // Null gradient pointers are skipped.
  ops::linear_backward(Host{}, x.data(), W.data(), r.data(), N, in, out, (double*)nullptr,
                       dW2.data());
  for (std::size_t i = 0; i < dW.size(); ++i) CHECK(dW2[i] == 3 * dW[i]);
}

TEST_CASE("linear on shapes past every tile and vector boundary matches a naive loop", "[layers]") {
  // The first shape: N spans several row blocks and depth blocks, out and in several dW
  // tiles, and none is a multiple of the vector width. The second spans several packed
  // panels of the weight (2048 x 2048) in both directions.
  struct Shape3 {
    std::int64_t N;
    int in, out;
  };
  const Shape3 s = GENERATE(Shape3{300, 290, 270}, Shape3{21, 2100, 4113});
  const std::int64_t N = s.N;
  const int in = s.in, out = s.out;
  INFO("N " << N << " in " << in << " out " << out);
  const Vec x = rand_vec(N * in, 4), W = rand_vec(out * in, 5), dy = rand_vec(N * out, 6);
  const Vec y_ref = naive_linear(x, W, N, in, out);
  // dx = dy W is a linear layer with weight W^T; dW = dy^T x one with N as the reduction.
  Vec Wt(std::size_t(in) * out), dyt(std::size_t(out) * N), xt(std::size_t(in) * N);
  for (int o = 0; o < out; ++o)
    for (int k = 0; k < in; ++k) Wt[std::size_t(k) * out + o] = W[std::size_t(o) * in + k];
  for (std::int64_t i = 0; i < N; ++i) {
    for (int o = 0; o < out; ++o) dyt[o * N + i] = dy[i * out + o];
    for (int k = 0; k < in; ++k) xt[k * N + i] = x[i * in + k];
  }
  const Vec dx_ref = naive_linear(dy, Wt, N, out, in);
  const Vec dW_ref = naive_linear(dyt, xt, out, int(N), in);

  Vec y(N * out), dx(N * in), dW(std::size_t(out) * in, 0.0);
  ops::linear_forward(Host{}, x.data(), W.data(), N, in, out, y.data());
  ops::linear_backward(Host{}, x.data(), W.data(), dy.data(), N, in, out, dx.data(), dW.data());
  CHECK(rel_l2(y.data(), y_ref.data(), y.size()) < 1e-14);
  CHECK(rel_l2(dx.data(), dx_ref.data(), dx.size()) < 1e-14);
  CHECK(rel_l2(dW.data(), dW_ref.data(), dW.size()) < 1e-14);

  const auto xf = to<float>(x), Wf = to<float>(W), dyf = to<float>(dy);
  std::vector<float> yf(N * out), dxf(N * in), dWf(std::size_t(out) * in, 0.f);
  ops::linear_forward(Host{}, xf.data(), Wf.data(), N, in, out, yf.data());
  ops::linear_backward(Host{}, xf.data(), Wf.data(), dyf.data(), N, in, out, dxf.data(),
                       dWf.data());
  CHECK(rel_l2(yf.data(), y_ref.data(), yf.size()) < 1e-5);
  CHECK(rel_l2(dxf.data(), dx_ref.data(), dxf.size()) < 1e-5);
  CHECK(rel_l2(dWf.data(), dW_ref.data(), dWf.size()) < 1e-5);
}

TEMPLATE_TEST_CASE("linear is bit-identical for 1, 2 and 3 OpenMP threads", "[layers]", float,
                   double) {
  using T = TestType;
  ThreadGuard guard;
  const std::int64_t N = 300;
  const int in = 290, out = 270;
  const auto x = to<T>(rand_vec(N * in, 7)), W = to<T>(rand_vec(out * in, 8)),
             dy = to<T>(rand_vec(N * out, 9));
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<T> y(N * out), dx(N * in), dW(std::size_t(out) * in, T(0));
    ops::linear_forward(Host{}, x.data(), W.data(), N, in, out, y.data());
    ops::linear_backward(Host{}, x.data(), W.data(), dy.data(), N, in, out, dx.data(), dW.data());
    return std::vector<std::vector<T>>{y, dx, dW};
  };
  const auto one = run(1);
  for (int threads : {2, 3}) {
    const auto many = run(threads);
    for (std::size_t k = 0; k < one.size(); ++k) {
      INFO("threads " << threads << " output " << k);
      CHECK(std::memcmp(one[k].data(), many[k].data(), one[k].size() * sizeof(T)) == 0);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Embedding

TEST_CASE("embedding forward, backward and token checks", "[layers]") {
  const int vocab = 4, d = 3;
  const std::int64_t N = 5;
  const std::vector<std::int32_t> tok = {2, 0, 2, 3, 2};  // repeated ids accumulate
  Vec E = rand_vec(vocab * d, 10), r = rand_vec(N * d, 11);
  Vec y(N * d);
  ops::embedding_forward(Host{}, tok.data(), E.data(), N, vocab, d, y.data());
  for (std::int64_t i = 0; i < N; ++i)
    for (int c = 0; c < d; ++c) CHECK(y[i * d + c] == E[tok[i] * d + c]);

  auto loss = [&] {
    Vec yy(N * d);
    ops::embedding_forward(Host{}, tok.data(), E.data(), N, vocab, d, yy.data());
    return dot(yy, r);
  };
  Vec dE(vocab * d, 0.0);
  ops::embedding_backward(Host{}, tok.data(), r.data(), N, vocab, d, dE.data());
  check_grad("dE", dE, E, loss);
  for (int c = 0; c < d; ++c) CHECK(dE[1 * d + c] == 0.0);  // token 1 never appears

  Vec dE2 = dE;
  ops::embedding_backward(Host{}, tok.data(), r.data(), N, vocab, d, dE2.data());
  Vec twice(dE.size());
  for (std::size_t i = 0; i < dE.size(); ++i) twice[i] = 2 * dE[i];
  check_close(dE2, twice);

  for (std::int32_t bad : {-1, vocab}) {
    std::vector<std::int32_t> t = tok;
    t[3] = bad;
    CHECK_THROWS_AS(ops::embedding_forward(Host{}, t.data(), E.data(), N, vocab, d, y.data()),
                    Error);
    CHECK_THROWS_WITH(ops::embedding_forward(Host{}, t.data(), E.data(), N, vocab, d, y.data()),
                      Catch::Contains("row 3") && Catch::Contains(std::to_string(bad)));
    CHECK_THROWS_AS(ops::embedding_backward(Host{}, t.data(), r.data(), N, vocab, d, dE.data()),
                    Error);
  }
}

// ---------------------------------------------------------------------------------------
// RMSNorm

TEST_CASE("rmsnorm forward by hand", "[layers]") {
  const Vec x = {3, 4};
  Vec y(2);
  const Vec w0 = {0, 0};
  ops::rmsnorm_forward(Host{}, x.data(), w0.data(), 1, 2, 0.0, y.data());
  check_close(y, {0.848528137423857, 1.131370849898476});
  const Vec w = {1, -0.5};  // scale 1 + w = (2, 0.5)
  ops::rmsnorm_forward(Host{}, x.data(), w.data(), 1, 2, 0.0, y.data());
  check_close(y, {2 * 0.848528137423857, 0.5 * 1.131370849898476});
}

TEST_CASE("rmsnorm backward matches finite differences", "[layers]") {
  const std::int64_t N = 5;
  const int d = 7;
  const double eps = 1e-6;
  Vec x = rand_vec(N * d, 12), w = rand_vec(d, 13, 0.3), r = rand_vec(N * d, 14);
  auto loss = [&] {
    Vec y(N * d);
    ops::rmsnorm_forward(Host{}, x.data(), w.data(), N, d, eps, y.data());
    return dot(y, r);
  };
  Vec dx(N * d), dw(d, 0.0);
  ops::rmsnorm_backward(Host{}, x.data(), w.data(), r.data(), N, d, eps, dx.data(), dw.data());
  check_grad("dx", dx, x, loss);
  check_grad("dw", dw, w, loss);

  Vec dx2(N * d, 123.0), dw2 = dw;
  ops::rmsnorm_backward(Host{}, x.data(), w.data(), r.data(), N, d, eps, dx2.data(), dw2.data());
  CHECK(dx2 == dx);
  for (int j = 0; j < d; ++j) CHECK(dw2[j] == 2 * dw[j]);
}

// ---------------------------------------------------------------------------------------
// Gated RMSNorm

TEST_CASE("gated rmsnorm forward by hand", "[layers]") {
  const Vec x = {3, 4}, z = {2, -1}, w = {1, 2};
  Vec y(2);
  ops::gated_rmsnorm_forward(Host{}, x.data(), z.data(), w.data(), 1, 2, 0.0, y.data());
  check_close(y, {1.4947622080498966, -0.6085449689365511}, 1e-14);
}

TEST_CASE("gated rmsnorm backward matches finite differences", "[layers]") {
  const std::int64_t N = 5;
  const int d = 7;
  const double eps = 1e-6;
  Vec x = rand_vec(N * d, 15), z = rand_vec(N * d, 16, 2.0), w = rand_vec(d, 17),
      r = rand_vec(N * d, 18);
  auto loss = [&] {
    Vec y(N * d);
    ops::gated_rmsnorm_forward(Host{}, x.data(), z.data(), w.data(), N, d, eps, y.data());
    return dot(y, r);
  };
  Vec dx(N * d), dz(N * d), dw(d, 0.0);
  ops::gated_rmsnorm_backward(Host{}, x.data(), z.data(), w.data(), r.data(), N, d, eps, dx.data(),
                              dz.data(), dw.data());
  check_grad("dx", dx, x, loss);
  check_grad("dz", dz, z, loss);
  check_grad("dw", dw, w, loss);

  Vec dx2(N * d, 123.0), dz2(N * d, -7.0), dw2 = dw;
  ops::gated_rmsnorm_backward(Host{}, x.data(), z.data(), w.data(), r.data(), N, d, eps, dx2.data(),
                              dz2.data(), dw2.data());
  CHECK(dx2 == dx);
  CHECK(dz2 == dz);
  for (int j = 0; j < d; ++j) CHECK(dw2[j] == 2 * dw[j]);
}

// ---------------------------------------------------------------------------------------
// SwiGLU

TEST_CASE("swiglu forward by hand and backward by finite differences", "[layers]") {
  const Vec g0 = {0, 1}, u0 = {5, 2};
  Vec y0(2);
  ops::swiglu_forward(Host{}, g0.data(), u0.data(), 2, y0.data());
  check_close(y0, {0.0, 1.4621171572600098}, 1e-14);

  const std::int64_t n = 35;
  Vec g = rand_vec(n, 19, 2.0), u = rand_vec(n, 20), r = rand_vec(n, 21);
  auto loss = [&] {
    Vec y(n);
    ops::swiglu_forward(Host{}, g.data(), u.data(), n, y.data());
    return dot(y, r);
  };
  Vec dg(n, 123.0), du(n, 123.0);  // overwritten
  ops::swiglu_backward(Host{}, g.data(), u.data(), r.data(), n, dg.data(), du.data());
  check_grad("dg", dg, g, loss);
  check_grad("du", du, u, loss);
}

// ---------------------------------------------------------------------------------------
// Cross-entropy

TEST_CASE("cross-entropy by hand", "[layers]") {
  const int V = 5;
  const std::int64_t N = 3;
  const Vec logits(N * V, 0.7);  // uniform: each row costs log V
  const std::vector<std::int32_t> tgt = {0, 4, 2};
  Vec dl(N * V);
  const double gs = 0.25;
  CHECK(ops::cross_entropy(Host{}, logits.data(), tgt.data(), N, V, gs, dl.data()) ==
        Approx(3 * std::log(5.0)).epsilon(1e-15));
  for (std::int64_t i = 0; i < N; ++i)
    for (int j = 0; j < V; ++j)
      CHECK(dl[i * V + j] == Approx(((j == tgt[i]) ? 0.2 - 1 : 0.2) * gs).epsilon(1e-14));

  // softmax([0, ln 3]) = (1/4, 3/4): target 0 costs ln 4.
  const Vec two = {0, std::log(3.0)};
  const std::int32_t t0 = 0;
  CHECK(ops::cross_entropy(Host{}, two.data(), &t0, 1, 2, 1.0, (double*)nullptr) ==
        Approx(std::log(4.0)).epsilon(1e-15));
  // Huge logits stay finite (log-sum-exp), in float too.
  const std::vector<float> big = {1000.f, 0.f};
  const std::int32_t t1 = 1;
  std::vector<float> dbig(2);
  CHECK(ops::cross_entropy(Host{}, big.data(), &t1, 1, 2, 1.0, dbig.data()) == Approx(1000.0));
  CHECK(dbig[0] == Approx(1.0f));
  CHECK(dbig[1] == Approx(-1.0f));
}

TEST_CASE("cross-entropy gradient matches finite differences; bad targets throw", "[layers]") {
  const int V = 7;
  const std::int64_t N = 5;
  const double gs = 1.0 / 3;
  Vec logits = rand_vec(N * V, 22, 2.0);
  const std::vector<std::int32_t> tgt = {6, 0, 3, 3, 1};
  auto loss = [&] {
    return ops::cross_entropy(Host{}, logits.data(), tgt.data(), N, V, gs, (double*)nullptr) * gs;
  };
  Vec dl(N * V, 123.0);
  ops::cross_entropy(Host{}, logits.data(), tgt.data(), N, V, gs, dl.data());
  check_grad("dlogits", dl, logits, loss);

  for (std::int32_t bad : {-1, V}) {
    std::vector<std::int32_t> t = tgt;
    t[2] = bad;
    CHECK_THROWS_AS(ops::cross_entropy(Host{}, logits.data(), t.data(), N, V, gs, dl.data()),
                    Error);
    CHECK_THROWS_WITH(ops::cross_entropy(Host{}, logits.data(), t.data(), N, V, gs, dl.data()),
                      Catch::Contains("row 2") && Catch::Contains(std::to_string(bad)));
  }
}

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

TEST_CASE("float instantiations agree with double", "[layers]") {
  // A smoke test of every float entry point against the fp64 result.
  const std::int64_t N = 9;
  const int d = 20;
  const Vec x = rand_vec(N * d, 32), z = rand_vec(N * d, 33), w = rand_vec(d, 34, 0.3),
            dy = rand_vec(N * d, 35);
  const auto xf = to<float>(x), zf = to<float>(z), wf = to<float>(w), dyf = to<float>(dy);
  Vec y(N * d), dx(N * d), dz(N * d), dw(d, 0.0);
  std::vector<float> yf(N * d), dxf(N * d), dzf(N * d), dwf(d, 0.f);
  ops::rmsnorm_forward(Host{}, x.data(), w.data(), N, d, 1e-6, y.data());
  ops::rmsnorm_forward(Host{}, xf.data(), wf.data(), N, d, 1e-6, yf.data());
  CHECK(rel_l2(yf.data(), y.data(), y.size()) < 1e-6);
  ops::gated_rmsnorm_backward(Host{}, x.data(), z.data(), w.data(), dy.data(), N, d, 1e-6,
                              dx.data(), dz.data(), dw.data());
  ops::gated_rmsnorm_backward(Host{}, xf.data(), zf.data(), wf.data(), dyf.data(), N, d, 1e-6,
                              dxf.data(), dzf.data(), dwf.data());
  CHECK(rel_l2(dxf.data(), dx.data(), dx.size()) < 1e-5);
  CHECK(rel_l2(dzf.data(), dz.data(), dz.size()) < 1e-5);
  CHECK(rel_l2(dwf.data(), dw.data(), dw.size()) < 1e-5);
  const std::vector<std::int32_t> tgt = {0, 19, 3, 3, 7, 1, 2, 5, 11};
  Vec dl(N * d);
  std::vector<float> dlf(N * d);
  const double ce = ops::cross_entropy(Host{}, x.data(), tgt.data(), N, d, 0.5, dl.data());
  const double cef = ops::cross_entropy(Host{}, xf.data(), tgt.data(), N, d, 0.5, dlf.data());
  CHECK(cef == Approx(ce).epsilon(1e-6));
  CHECK(rel_l2(dlf.data(), dl.data(), dl.size()) < 1e-6);
}
