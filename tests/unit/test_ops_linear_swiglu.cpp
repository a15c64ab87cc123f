// Tests src/ops/linear and src/ops/swiglu (the MLP's ops) on the host: by hand, against
// finite differences and a naive loop, and bit-identical over OpenMP thread counts.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/precision.h"
#include "ops/linear/linear.h"
#include "ops/swiglu/swiglu.h"
#include "ops_support.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

// y = x W^T by the textbook triple loop, in double.
Vec naive_linear(const Vec& x, const Vec& W, std::int64_t N, int in, int out) {
  Vec y(std::size_t(N) * out, 0.0);
  for (std::int64_t i = 0; i < N; ++i)
    for (int o = 0; o < out; ++o)
      for (int k = 0; k < in; ++k) y[i * out + o] += x[i * in + k] * W[std::size_t(o) * in + k];
  return y;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Linear

TEST_CASE("linear forward by hand", "[layers]") {
  const Vec x = {1, 2, 3, 4, 5, 6}, W = {1, 0, -1, 2, 1, 0};  // x [2, 3], W [2, 3]
  Vec y(4);
  ops::linear_forward(Host{}, Precision::plain, x.data(), W.data(), 2, 3, 2, y.data());
  CHECK(y == Vec{-2, 4, -2, 13});
}

TEST_CASE("linear backward matches finite differences", "[layers]") {
  const std::int64_t N = 5;
  const int in = 7, out = 6;
  Vec x = rand_vec(N * in, 1), W = rand_vec(out * in, 2), r = rand_vec(N * out, 3);
  auto loss = [&] {
    Vec y(N * out);
    ops::linear_forward(Host{}, Precision::plain, x.data(), W.data(), N, in, out, y.data());
    return dot(y, r);
  };
  Vec dx(N * in), dW(out * in, 0.0);
  ops::linear_backward(Host{}, Precision::plain, x.data(), W.data(), r.data(), N, in, out,
                       dx.data(), dW.data());
  check_grad("dx", dx, x, loss);
  check_grad("dW", dW, W, loss);

  // dx is overwritten, dW accumulates: a second call gives the same dx and exactly 2 dW.
  Vec dx2(N * in, 123.0), dW2 = dW;
  ops::linear_backward(Host{}, Precision::plain, x.data(), W.data(), r.data(), N, in, out,
                       dx2.data(), dW2.data());
  CHECK(dx2 == dx);
  for (std::size_t i = 0; i < dW.size(); ++i) CHECK(dW2[i] == 2 * dW[i]);
  // Null gradient pointers are skipped.
  ops::linear_backward(Host{}, Precision::plain, x.data(), W.data(), r.data(), N, in, out,
                       (double*)nullptr, dW2.data());
  for (std::size_t i = 0; i < dW.size(); ++i) CHECK(dW2[i] == 3 * dW[i]);
}

TEST_CASE("linear on shapes past every tile and vector boundary matches a naive loop", "[layers]") {
  // The first shape: N spans several row blocks and depth blocks, out and in several dW
  // tiles, and none is a multiple of the vector width. The second spans several packed
  // panels of the weight (2048 x 2048) in both directions; the third several blocks of
  // dW's reduction over N (2048 rows each, accumulated in turn).
  struct Shape3 {
    std::int64_t N;
    int in, out;
  };
  const Shape3 s = GENERATE(Shape3{300, 290, 270}, Shape3{21, 2100, 4113}, Shape3{4500, 37, 29});
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

  auto check = [&](auto zero, double tol) {
    using T = decltype(zero);
    INFO((sizeof(T) == 8 ? "double" : "float"));
    const auto xt_ = to<T>(x), Wt_ = to<T>(W), dyt_ = to<T>(dy);
    std::vector<T> y(N * out), dx(N * in), dW(std::size_t(out) * in, T(0));
    ops::linear_forward(Host{}, Precision::plain, xt_.data(), Wt_.data(), N, in, out, y.data());
    ops::linear_backward(Host{}, Precision::plain, xt_.data(), Wt_.data(), dyt_.data(), N, in, out,
                         dx.data(), dW.data());
    CHECK(rel_l2(y.data(), y_ref.data(), y.size()) < tol);
    CHECK(rel_l2(dx.data(), dx_ref.data(), dx.size()) < tol);
    CHECK(rel_l2(dW.data(), dW_ref.data(), dW.size()) < tol);
  };
  check(0.0, 1e-14);
  check(0.0f, 1e-5);
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
    ops::linear_forward(Host{}, Precision::plain, x.data(), W.data(), N, in, out, y.data());
    ops::linear_backward(Host{}, Precision::plain, x.data(), W.data(), dy.data(), N, in, out,
                         dx.data(), dW.data());
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

TEMPLATE_TEST_CASE("linear backward with accumulate adds dy W to dx, bit for bit", "[layers]",
                   float, double) {
  // The bits of computing dy W apart and adding it to dx, as the callers did before: out =
  // 200 is one depth block of the GEMM (it adds into dx itself), out = 600 three (summed
  // apart, then added), out = 0 an empty sum (dx unchanged); plain and in the bf16 mode.
  using T = TestType;
  const int out = GENERATE(200, 600, 0);
  const bool bf16 = GENERATE(false, true);
  const std::int64_t N = 37;
  const int in = 45;
  INFO("out " << out << (bf16 ? ", bf16 mode" : ""));
  const Precision mode = precision_of(bf16 && std::is_same_v<T, float>);
  const auto x = to<T>(rand_vec(N * in, 17)), W = to<T>(rand_vec(std::size_t(out) * in, 18)),
             dy = to<T>(rand_vec(N * out, 19)), dx0 = to<T>(rand_vec(N * in, 20));
  std::vector<T> part(N * in), want(N * in), dW(std::size_t(out) * in, T(0)), dW2 = dW;
  ops::linear_backward(Host{}, mode, x.data(), W.data(), dy.data(), N, in, out, part.data(),
                       dW.data());
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = dx0[i] + part[i];
  std::vector<T> dx = dx0;
  ops::linear_backward(Host{}, mode, x.data(), W.data(), dy.data(), N, in, out, dx.data(),
                       dW2.data(),
                       /*accumulate=*/true);
  CHECK(std::memcmp(dx.data(), want.data(), dx.size() * sizeof(T)) == 0);
  CHECK(dW2 == dW);  // dW accumulates as ever
}

TEST_CASE("linear in the bf16 mode is a bf16 x bf16 matmul with float sums", "[layers][bf16]") {
  // The oracle: the naive double loop on the operands narrowed to bf16 by to_bf16 (tested
  // against distances in double, test_bf16.cpp). The float sums differ from it by float
  // rounding alone (< 1e-6 here); the unrounded product differs by bf16's (~1e-3), so the
  // second check fails if an operand is not rounded.
  const std::int64_t N = 300;
  const int in = 290, out = 270;
  const Vec x = rand_vec(N * in, 14), W = rand_vec(out * in, 15), dy = rand_vec(N * out, 16);
  auto narrowed = [](const Vec& v) {
    Vec r(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) r[i] = to_float(to_bf16(float(v[i])));
    return r;
  };
  const Vec xb = narrowed(x), Wb = narrowed(W), dyb = narrowed(dy);
  Vec Wt(std::size_t(in) * out), Wbt(Wt.size()), dyt(std::size_t(out) * N), dybt(dyt.size()),
      xt(std::size_t(in) * N), xbt(xt.size());
  for (int o = 0; o < out; ++o)
    for (int k = 0; k < in; ++k) {
      Wt[std::size_t(k) * out + o] = W[std::size_t(o) * in + k];
      Wbt[std::size_t(k) * out + o] = Wb[std::size_t(o) * in + k];
    }
  for (std::int64_t i = 0; i < N; ++i) {
    for (int o = 0; o < out; ++o)
      dyt[o * N + i] = dy[i * out + o], dybt[o * N + i] = dyb[i * out + o];
    for (int k = 0; k < in; ++k) xt[k * N + i] = x[i * in + k], xbt[k * N + i] = xb[i * in + k];
  }
  const Vec y_ref = naive_linear(xb, Wb, N, in, out), y_exact = naive_linear(x, W, N, in, out);
  const Vec dx_ref = naive_linear(dyb, Wbt, N, out, in),
            dx_exact = naive_linear(dy, Wt, N, out, in);
  const Vec dW_ref = naive_linear(dybt, xbt, out, int(N), in),
            dW_exact = naive_linear(dyt, xt, out, int(N), in);

  const auto xf = to<float>(x), Wf = to<float>(W), dyf = to<float>(dy);
  auto run = [&](bool bf16) {
    const Precision mode = precision_of(bf16);
    std::vector<float> y(N * out), dx(N * in), dW(std::size_t(out) * in, 0.f);
    ops::linear_forward(Host{}, mode, xf.data(), Wf.data(), N, in, out, y.data());
    ops::linear_backward(Host{}, mode, xf.data(), Wf.data(), dyf.data(), N, in, out, dx.data(),
                         dW.data());
    return std::vector<std::vector<float>>{y, dx, dW};
  };
  const auto plain_before = run(false);
  const auto got = run(true);
  const Vec* ref[] = {&y_ref, &dx_ref, &dW_ref};
  const Vec* exact[] = {&y_exact, &dx_exact, &dW_exact};
  for (std::size_t k = 0; k < 3; ++k) {
    INFO("output " << k << " (y, dx, dW)");
    CHECK(rel_l2(got[k].data(), ref[k]->data(), got[k].size()) < 1e-6);
    CHECK(rel_l2(got[k].data(), exact[k]->data(), got[k].size()) > 1e-4);
  }
  SECTION("bit-identical for 1, 2 and 3 threads; a plain call after a bf16 one is plain") {
    ThreadGuard guard;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      const auto again = run(true);
      for (std::size_t k = 0; k < 3; ++k)
        CHECK(std::memcmp(again[k].data(), got[k].data(), got[k].size() * sizeof(float)) == 0);
    }
    const auto plain = run(false);
    for (std::size_t k = 0; k < 3; ++k) {
      CHECK(std::memcmp(plain[k].data(), plain_before[k].data(), plain[k].size() * sizeof(float)) ==
            0);
      CHECK(std::memcmp(plain[k].data(), got[k].data(), plain[k].size() * sizeof(float)) != 0);
    }
  }
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
