// The CUDA versions of the ops of src/ops against their host versions, and the optimizer
// on the GPU against the host one (train/optimizer.h), on random data, in fp32 and fp64: forward
// and backward, input gradients overwritten (the buffers start as garbage), parameter gradients
// accumulated (they start non-zero, and some are accumulated twice), null gradient pointers
// skipped, out-of-range ids rejected. Tolerance: relative L2 error
// <= 1e-5 in fp32 and <= 1e-12 in fp64 against the host op run in the same precision; the
// ops of the attention layer and the MoE block (at the end) at gpu_support.h's 1e-4 and
// 1e-10, exactly where the result is a copy, a single rounding, or a top-k choice.
// Skipped (exit 77) where no GPU is visible; CI compiles and links it without one.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/precision.h"
#include "core/rng.h"
#include "expert_ids.h"
#include "gpu_support.h"
#include "model/params.h"
#include "ops/adamw/adamw.h"
#include "ops/attention/attention.h"
#include "ops/attention/cudnn_attention.h"
#include "ops/attention/flash_attention.h"
#include "ops/bias/bias.h"
#include "ops/conv/conv.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/embedding/embedding.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/gating/gating.h"
#include "ops/grouped_linear/grouped_linear.h"
#include "ops/linear/linear.h"
#include "ops/moe/moe.h"
#include "ops/moe_route/moe_route.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "ops/rope/rope.h"
#include "ops/swiglu/swiglu.h"
#include "runtime/cuda_device.h"
#include "test_support.h"
#include "train/optimizer.h"

using namespace gdn;
using gdn::test::rel_l2;
using i64 = std::int64_t;

namespace {

template <typename T>
double tolerance() {
  return sizeof(T) == 4 ? 1e-5 : 1e-12;
}

template <typename T>
std::vector<T> random_vec(std::size_t n, std::uint64_t seed, double scale = 1.0,
                          double offset = 0.0) {
  Rng rng(seed);
  std::vector<T> v(n);
  for (T& x : v) x = T(offset + scale * rng.normal());
  return v;
}

std::vector<std::int32_t> random_ids(std::size_t n, int range, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> v(n);
  for (std::int32_t& x : v) x = std::int32_t(rng.next_u64() % std::uint64_t(range));
  return v;
}

template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& h) {
  return gdn::to_device<Cuda>(h.data(), h.size());
}

template <typename T>
void check_close(const std::string& what, const DeviceBuffer<T>& got, const std::vector<T>& want) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  const std::vector<T> g = to_host<Cuda>(got);
  const double err = rel_l2(g.data(), want.data(), want.size());
  INFO("relative error " << err);
  CHECK(err <= tolerance<T>());
}

void check_close_scalar(const std::string& what, double got, double want, double tol) {
  INFO(what << ": got " << got << ", want " << want);
  CHECK(std::abs(got - want) <= tol * std::abs(want));
}

}  // namespace

TEMPLATE_TEST_CASE("cuda linear matches the host, dW accumulates", "[cuda_ops]", float, double) {
  using T = TestType;
  struct Shape3 {
    i64 N;
    int in, out;
  };
  for (const Shape3 s : {Shape3{37, 70, 45}, Shape3{300, 256, 129}, Shape3{1, 3, 2}}) {
    INFO("N " << s.N << " in " << s.in << " out " << s.out);
    const std::size_t nx = std::size_t(s.N) * s.in, ny = std::size_t(s.N) * s.out,
                      nw = std::size_t(s.out) * s.in;
    const auto x = random_vec<T>(nx, 1), W = random_vec<T>(nw, 2, 0.1), dy = random_vec<T>(ny, 3);
    auto dW = random_vec<T>(nw, 4);  // non-zero: accumulation
    std::vector<T> y(ny), dx(nx);
    ops::linear_forward(Host{}, Precision::plain, x.data(), W.data(), s.N, s.in, s.out, y.data());
    ops::linear_backward(Host{}, Precision::plain, x.data(), W.data(), dy.data(), s.N, s.in, s.out,
                         dx.data(), dW.data());

    auto dx_ = to_device(random_vec<T>(nx, 5)), x_ = to_device(x), W_ = to_device(W),
         dy_ = to_device(dy), dW_ = to_device(random_vec<T>(nw, 4));
    DeviceBuffer<T> y_(ny);
    ops::linear_forward(Cuda{}, Precision::plain, x_.data(), W_.data(), s.N, s.in, s.out,
                        y_.data());
    check_close("y", y_, y);
    ops::linear_backward(Cuda{}, Precision::plain, x_.data(), W_.data(), dy_.data(), s.N, s.in,
                         s.out, dx_.data(), dW_.data());
    check_close("dx", dx_, dx);
    check_close("dW", dW_, dW);

    // A second call with dx skipped adds the same dW again.
    ops::linear_backward(Host{}, Precision::plain, x.data(), W.data(), dy.data(), s.N, s.in, s.out,
                         (T*)nullptr, dW.data());
    ops::linear_backward(Cuda{}, Precision::plain, x_.data(), W_.data(), dy_.data(), s.N, s.in,
                         s.out, (T*)nullptr, dW_.data());
    check_close("dW after two calls", dW_, dW);
    // dW skipped: dx still overwritten.
    auto dx2_ = to_device(random_vec<T>(nx, 6));
    ops::linear_backward(Cuda{}, Precision::plain, x_.data(), W_.data(), dy_.data(), s.N, s.in,
                         s.out, dx2_.data(), (T*)nullptr);
    check_close("dx without dW", dx2_, dx);
    // accumulate: dx2_ += dy W, that is 2 dx.
    ops::linear_backward(Cuda{}, Precision::plain, x_.data(), W_.data(), dy_.data(), s.N, s.in,
                         s.out, dx2_.data(), (T*)nullptr, /*accumulate=*/true);
    std::vector<T> twice(dx);
    for (T& v : twice) v *= 2;
    check_close("dx accumulated", dx2_, twice);

    // The bf16 mode (float): cuBLASLt on bf16 operands against the host's bf16 matmul, the
    // same products summed in fp32 in another order.
    if constexpr (std::is_same_v<T, float>) {
      std::vector<T> yb(ny), dxb(dx), dWb(dW);
      ops::linear_forward(Host{}, Precision::bf16, x.data(), W.data(), s.N, s.in, s.out, yb.data());
      ops::linear_backward(Host{}, Precision::bf16, x.data(), W.data(), dy.data(), s.N, s.in, s.out,
                           dxb.data(), dWb.data(), /*accumulate=*/true);
      auto dxb_ = to_device(dx), dWb_ = to_device(dW);
      ops::linear_forward(Cuda{}, Precision::bf16, x_.data(), W_.data(), s.N, s.in, s.out,
                          y_.data());
      ops::linear_backward(Cuda{}, Precision::bf16, x_.data(), W_.data(), dy_.data(), s.N, s.in,
                           s.out, dxb_.data(), dWb_.data(), /*accumulate=*/true);
      const std::vector<T> gy = to_host<Cuda>(y_), gdx = to_host<Cuda>(dxb_),
                           gdW = to_host<Cuda>(dWb_);
      CHECK(rel_l2(gy.data(), yb.data(), ny) <= 1e-5);
      CHECK(rel_l2(gdx.data(), dxb.data(), nx) <= 1e-5);
      CHECK(rel_l2(gdW.data(), dWb.data(), nw) <= 1e-5);
    }
  }
}

TEMPLATE_TEST_CASE("cuda embedding matches the host, repeated tokens add in order", "[cuda_ops]",
                   float, double) {
  using T = TestType;
  const int vocab = 50, d = 33;
  const i64 N = 400;  // many repeats of each token
  const auto tokens = random_ids(std::size_t(N), vocab, 7);
  const auto E = random_vec<T>(std::size_t(vocab) * d, 8),
             dy = random_vec<T>(std::size_t(N) * d, 9);
  auto dE = random_vec<T>(E.size(), 10);
  std::vector<T> y(std::size_t(N) * d);
  ops::embedding_forward(Host{}, tokens.data(), E.data(), N, vocab, d, y.data());
  ops::embedding_backward(Host{}, tokens.data(), dy.data(), N, vocab, d, dE.data());

  auto tok_ = to_device(tokens);
  auto E_ = to_device(E), dy_ = to_device(dy), dE_ = to_device(random_vec<T>(E.size(), 10));
  DeviceBuffer<T> y_(y.size());
  ops::embedding_forward(Cuda{}, tok_.data(), E_.data(), N, vocab, d, y_.data());
  CHECK(to_host<Cuda>(y_) == y);  // a gather: exact
  ops::embedding_backward(Cuda{}, tok_.data(), dy_.data(), N, vocab, d, dE_.data());
  CHECK(to_host<Cuda>(dE_) == dE);  // the same additions in the same order: exact
  check_close("dE", dE_, dE);

  for (const std::int32_t bad : {-1, vocab}) {
    auto t = tokens;
    t[17] = bad;
    auto bad_ = to_device(t);
    REQUIRE_THROWS_AS(
        ops::embedding_forward(Cuda{}, bad_.data(), E_.data(), N, vocab, d, y_.data()), gdn::Error);
    REQUIRE_THROWS_AS(
        ops::embedding_backward(Cuda{}, bad_.data(), dy_.data(), N, vocab, d, dE_.data()),
        gdn::Error);
  }
}

TEMPLATE_TEST_CASE("cuda rmsnorm matches the host", "[cuda_ops]", float, double) {
  using T = TestType;
  const double eps = 1e-6;
  struct Nd {
    i64 N;
    int d;
  };
  for (const Nd s : {Nd{600, 70}, Nd{5, 20}, Nd{33, 1024}}) {
    INFO("N " << s.N << " d " << s.d);
    const std::size_t n = std::size_t(s.N) * s.d;
    const auto x = random_vec<T>(n, 11), w = random_vec<T>(std::size_t(s.d), 12, 0.1),
               dy = random_vec<T>(n, 13);
    auto dw = random_vec<T>(std::size_t(s.d), 14);
    std::vector<T> y(n), dx(n);
    ops::rmsnorm_forward(Host{}, x.data(), w.data(), s.N, s.d, eps, y.data());
    ops::rmsnorm_backward(Host{}, x.data(), w.data(), dy.data(), s.N, s.d, eps, dx.data(),
                          dw.data());

    auto x_ = to_device(x), w_ = to_device(w), dy_ = to_device(dy),
         dw_ = to_device(random_vec<T>(std::size_t(s.d), 14)),
         dx_ = to_device(random_vec<T>(n, 15));
    DeviceBuffer<T> y_(n);
    ops::rmsnorm_forward(Cuda{}, x_.data(), w_.data(), s.N, s.d, eps, y_.data());
    check_close("y", y_, y);
    ops::rmsnorm_backward(Cuda{}, x_.data(), w_.data(), dy_.data(), s.N, s.d, eps, dx_.data(),
                          dw_.data());
    check_close("dx", dx_, dx);
    check_close("dw", dw_, dw);

    ops::rmsnorm_backward(Host{}, x.data(), w.data(), dy.data(), s.N, s.d, eps, (T*)nullptr,
                          dw.data());
    ops::rmsnorm_backward(Cuda{}, x_.data(), w_.data(), dy_.data(), s.N, s.d, eps, (T*)nullptr,
                          dw_.data());
    check_close("dw after two calls", dw_, dw);
    auto dx2_ = to_device(random_vec<T>(n, 16));
    ops::rmsnorm_backward(Cuda{}, x_.data(), w_.data(), dy_.data(), s.N, s.d, eps, dx2_.data(),
                          (T*)nullptr);
    check_close("dx without dw", dx2_, dx);
  }
}

TEMPLATE_TEST_CASE("cuda gated rmsnorm matches the host", "[cuda_ops]", float, double) {
  using T = TestType;
  const double eps = 1e-6;
  struct Nd {
    i64 N;
    int d;
  };
  for (const Nd s : {Nd{520, 128}, Nd{7, 20}, Nd{300, 45}}) {
    INFO("N " << s.N << " d " << s.d);
    const std::size_t n = std::size_t(s.N) * s.d;
    const auto x = random_vec<T>(n, 21), z = random_vec<T>(n, 22),
               w = random_vec<T>(std::size_t(s.d), 23, 0.1, 1.0), dy = random_vec<T>(n, 24);
    auto dw = random_vec<T>(std::size_t(s.d), 25);
    std::vector<T> y(n), dx(n), dz(n);
    ops::gated_rmsnorm_forward(Host{}, x.data(), z.data(), w.data(), s.N, s.d, eps, y.data());
    ops::gated_rmsnorm_backward(Host{}, x.data(), z.data(), w.data(), dy.data(), s.N, s.d, eps,
                                dx.data(), dz.data(), dw.data());

    auto x_ = to_device(x), z_ = to_device(z), w_ = to_device(w), dy_ = to_device(dy),
         dw_ = to_device(random_vec<T>(std::size_t(s.d), 25)),
         dx_ = to_device(random_vec<T>(n, 26)), dz_ = to_device(random_vec<T>(n, 27));
    DeviceBuffer<T> y_(n);
    ops::gated_rmsnorm_forward(Cuda{}, x_.data(), z_.data(), w_.data(), s.N, s.d, eps, y_.data());
    check_close("y", y_, y);
    ops::gated_rmsnorm_backward(Cuda{}, x_.data(), z_.data(), w_.data(), dy_.data(), s.N, s.d, eps,
                                dx_.data(), dz_.data(), dw_.data());
    check_close("dx", dx_, dx);
    check_close("dz", dz_, dz);
    check_close("dw", dw_, dw);

    // Only dw (accumulates again); then only dz, then only dx.
    ops::gated_rmsnorm_backward(Host{}, x.data(), z.data(), w.data(), dy.data(), s.N, s.d, eps,
                                (T*)nullptr, (T*)nullptr, dw.data());
    ops::gated_rmsnorm_backward(Cuda{}, x_.data(), z_.data(), w_.data(), dy_.data(), s.N, s.d, eps,
                                (T*)nullptr, (T*)nullptr, dw_.data());
    check_close("dw after two calls", dw_, dw);
    auto dz2_ = to_device(random_vec<T>(n, 28)), dx2_ = to_device(random_vec<T>(n, 29));
    ops::gated_rmsnorm_backward(Cuda{}, x_.data(), z_.data(), w_.data(), dy_.data(), s.N, s.d, eps,
                                (T*)nullptr, dz2_.data(), (T*)nullptr);
    check_close("dz alone", dz2_, dz);
    ops::gated_rmsnorm_backward(Cuda{}, x_.data(), z_.data(), w_.data(), dy_.data(), s.N, s.d, eps,
                                dx2_.data(), (T*)nullptr, (T*)nullptr);
    check_close("dx alone", dx2_, dx);
  }
}

TEMPLATE_TEST_CASE("cuda swiglu matches the host", "[cuda_ops]", float, double) {
  using T = TestType;
  const i64 n = 5003;
  const std::size_t un = std::size_t(n);
  const auto g = random_vec<T>(un, 31, 2.0), u = random_vec<T>(un, 32), dy = random_vec<T>(un, 33);
  std::vector<T> y(un), dg(un), du(un);
  ops::swiglu_forward(Host{}, g.data(), u.data(), n, y.data());
  ops::swiglu_backward(Host{}, g.data(), u.data(), dy.data(), n, dg.data(), du.data());

  auto g_ = to_device(g), u_ = to_device(u), dy_ = to_device(dy),
       dg_ = to_device(random_vec<T>(un, 34)), du_ = to_device(random_vec<T>(un, 35));
  DeviceBuffer<T> y_(un);
  ops::swiglu_forward(Cuda{}, g_.data(), u_.data(), n, y_.data());
  check_close("y", y_, y);
  ops::swiglu_backward(Cuda{}, g_.data(), u_.data(), dy_.data(), n, dg_.data(), du_.data());
  check_close("dg", dg_, dg);
  check_close("du", du_, du);
  auto dg2_ = to_device(random_vec<T>(un, 36));
  ops::swiglu_backward(Cuda{}, g_.data(), u_.data(), dy_.data(), n, dg2_.data(), (T*)nullptr);
  check_close("dg alone", dg2_, dg);
}

TEMPLATE_TEST_CASE("cuda causal conv + SiLU matches the host, halo rows included", "[cuda_ops]",
                   float, double) {
  using T = TestType;
  struct Conv {
    int B;
    i64 T_len;
    int C, W;
  };
  for (const Conv s : {Conv{2, 300, 40, 4}, Conv{1, 5, 3, 4}, Conv{3, 70, 17, 1}}) {
    INFO("B " << s.B << " T " << s.T_len << " C " << s.C << " W " << s.W);
    const std::size_t nx = std::size_t(s.B) * (s.T_len + s.W - 1) * s.C,
                      ny = std::size_t(s.B) * s.T_len * s.C, nw = std::size_t(s.C) * s.W;
    const auto x = random_vec<T>(nx, 41), w = random_vec<T>(nw, 42, 0.5),
               dy = random_vec<T>(ny, 43);
    auto dw = random_vec<T>(nw, 44);
    std::vector<T> y(ny), dx(nx);
    ops::causal_conv_silu_forward(Host{}, x.data(), w.data(), s.B, s.T_len, s.C, s.W, y.data());
    ops::causal_conv_silu_backward(Host{}, x.data(), w.data(), dy.data(), s.B, s.T_len, s.C, s.W,
                                   dx.data(), dw.data());

    auto x_ = to_device(x), w_ = to_device(w), dy_ = to_device(dy),
         dw_ = to_device(random_vec<T>(nw, 44)), dx_ = to_device(random_vec<T>(nx, 45));
    DeviceBuffer<T> y_(ny);
    ops::causal_conv_silu_forward(Cuda{}, x_.data(), w_.data(), s.B, s.T_len, s.C, s.W, y_.data());
    check_close("y", y_, y);
    ops::causal_conv_silu_backward(Cuda{}, x_.data(), w_.data(), dy_.data(), s.B, s.T_len, s.C, s.W,
                                   dx_.data(), dw_.data());
    check_close("dx", dx_, dx);
    check_close("dw", dw_, dw);

    ops::causal_conv_silu_backward(Host{}, x.data(), w.data(), dy.data(), s.B, s.T_len, s.C, s.W,
                                   (T*)nullptr, dw.data());
    ops::causal_conv_silu_backward(Cuda{}, x_.data(), w_.data(), dy_.data(), s.B, s.T_len, s.C, s.W,
                                   (T*)nullptr, dw_.data());
    check_close("dw after two calls", dw_, dw);
    auto dx2_ = to_device(random_vec<T>(nx, 46));
    ops::causal_conv_silu_backward(Cuda{}, x_.data(), w_.data(), dy_.data(), s.B, s.T_len, s.C, s.W,
                                   dx2_.data(), (T*)nullptr);
    check_close("dx without dw", dx2_, dx);
  }
}

TEMPLATE_TEST_CASE("cuda GDN gating matches the host", "[cuda_ops]", float, double) {
  using T = TestType;
  const i64 N = 1100;  // several row blocks
  const int H = 6;
  const std::size_t n = std::size_t(N) * H;
  const auto b = random_vec<T>(n, 51, 2.0), a = random_vec<T>(n, 52, 3.0),
             A_log = random_vec<T>(std::size_t(H), 53, 0.5),
             dt_bias = random_vec<T>(std::size_t(H), 54, 0.5), dbeta = random_vec<T>(n, 55),
             dg = random_vec<T>(n, 56);
  auto dA = random_vec<T>(std::size_t(H), 57), ddt = random_vec<T>(std::size_t(H), 58);
  std::vector<T> beta(n), g(n), db(n), da(n);
  ops::gdn_gating_forward(Host{}, b.data(), a.data(), A_log.data(), dt_bias.data(), N, H,
                          beta.data(), g.data());
  ops::gdn_gating_backward(Host{}, b.data(), a.data(), A_log.data(), dt_bias.data(), dbeta.data(),
                           dg.data(), N, H, db.data(), da.data(), dA.data(), ddt.data());

  auto b_ = to_device(b), a_ = to_device(a), A_ = to_device(A_log), dt_ = to_device(dt_bias),
       dbeta_ = to_device(dbeta), dg_ = to_device(dg), dA_ = to_device(random_vec<T>(H, 57)),
       ddt_ = to_device(random_vec<T>(H, 58)), db_ = to_device(random_vec<T>(n, 59)),
       da_ = to_device(random_vec<T>(n, 60));
  DeviceBuffer<T> beta_(n), g_(n);
  ops::gdn_gating_forward(Cuda{}, b_.data(), a_.data(), A_.data(), dt_.data(), N, H, beta_.data(),
                          g_.data());
  check_close("beta", beta_, beta);
  check_close("g", g_, g);
  ops::gdn_gating_backward(Cuda{}, b_.data(), a_.data(), A_.data(), dt_.data(), dbeta_.data(),
                           dg_.data(), N, H, db_.data(), da_.data(), dA_.data(), ddt_.data());
  check_close("db", db_, db);
  check_close("da", da_, da);
  check_close("dA_log", dA_, dA);
  check_close("ddt_bias", ddt_, ddt);

  // Only dA_log accumulates again; ddt_bias and the input gradients are skipped.
  ops::gdn_gating_backward(Host{}, b.data(), a.data(), A_log.data(), dt_bias.data(), dbeta.data(),
                           dg.data(), N, H, (T*)nullptr, (T*)nullptr, dA.data(), (T*)nullptr);
  ops::gdn_gating_backward(Cuda{}, b_.data(), a_.data(), A_.data(), dt_.data(), dbeta_.data(),
                           dg_.data(), N, H, (T*)nullptr, (T*)nullptr, dA_.data(), (T*)nullptr);
  check_close("dA_log after two calls", dA_, dA);
  check_close("ddt_bias untouched", ddt_, ddt);
}

TEMPLATE_TEST_CASE("cuda cross-entropy matches the host", "[cuda_ops]", float, double) {
  using T = TestType;
  struct NV {
    i64 N;
    int V;
  };
  for (const NV s : {NV{40, 1000}, NV{3, 7}, NV{129, 3000}}) {
    INFO("N " << s.N << " V " << s.V);
    const std::size_t n = std::size_t(s.N) * s.V;
    const auto logits = random_vec<T>(n, 61, 3.0);
    const auto targets = random_ids(std::size_t(s.N), s.V, 62);
    const double grad_scale = 1.0 / 37.0;
    std::vector<T> dl(n);
    const double loss =
        ops::cross_entropy(Host{}, logits.data(), targets.data(), s.N, s.V, grad_scale, dl.data());

    auto l_ = to_device(logits), dl_ = to_device(random_vec<T>(n, 63));
    auto t_ = to_device(targets);
    const double loss_ =
        ops::cross_entropy(Cuda{}, l_.data(), t_.data(), s.N, s.V, grad_scale, dl_.data());
    check_close_scalar("loss", loss_, loss, tolerance<T>());
    check_close("dlogits", dl_, dl);
    const double loss2_ =
        ops::cross_entropy(Cuda{}, l_.data(), t_.data(), s.N, s.V, grad_scale, (T*)nullptr);
    CHECK(loss2_ == loss_);  // deterministic, and dlogits skipped
  }
  const int V = 10;
  auto l_ = to_device(random_vec<T>(4 * V, 64));
  DeviceBuffer<T> dl_(4 * V);
  for (const std::int32_t bad : {-1, V}) {
    auto t_ = to_device(std::vector<std::int32_t>{1, 2, bad, 3});
    REQUIRE_THROWS_AS(ops::cross_entropy(Cuda{}, l_.data(), t_.data(), 4, V, 1.0, dl_.data()),
                      gdn::Error);
  }
}

TEMPLATE_TEST_CASE("cuda cross_entropy_add over blocks matches the host's", "[cuda_ops]", float,
                   double) {
  // Blocks [0, 300), [300, 301), [301, 700) into one device total: the loss as the host
  // adds it, and the first bad target (row 650, then row 5) with its row of the run.
  using T = TestType;
  const i64 N = 700;
  const int V = 500;
  const auto logits = random_vec<T>(std::size_t(N) * V, 65, 3.0);
  auto targets = random_ids(std::size_t(N), V, 66);
  targets[10] = ops::kIgnoreTarget;
  const std::vector<i64> cut = {0, 300, 301, 700};
  auto l_ = to_device(logits);
  DeviceBuffer<T> dl_(std::size_t(N) * V);
  auto run = [&](auto dev, const std::int32_t* t, const T* l, T* dl) {
    using Dev = decltype(dev);
    Buffer<Dev, ops::CrossEntropyTotal> total(1);
    for (std::size_t b = 0; b + 1 < cut.size(); ++b)
      ops::cross_entropy_add(dev, l + cut[b] * V, t + cut[b], cut[b + 1] - cut[b], V, 0.25,
                             dl + cut[b] * V, cut[b], total.data());
    ops::CrossEntropyTotal h;
    Dev::download(&h, total.data(), 1);
    return h;
  };
  for (int round = 0; round < 3; ++round) {
    if (round == 1) targets[650] = V;
    if (round == 2) targets[5] = -3;
    INFO("round " << round);
    std::vector<T> dl(std::size_t(N) * V);
    auto t_ = to_device(targets);
    const ops::CrossEntropyTotal want = run(Host{}, targets.data(), logits.data(), dl.data());
    const ops::CrossEntropyTotal got = run(Cuda{}, t_.data(), l_.data(), dl_.data());
    check_close_scalar("loss", got.loss, want.loss, tolerance<T>());
    check_close("dlogits", dl_, dl);
    CHECK(got.bad == want.bad);
    CHECK(got.bad_row == want.bad_row);
    CHECK(got.bad_target == want.bad_target);
    CHECK(got.bad_row == (round == 0 ? 0 : round == 1 ? 650 : 5));
  }
}

TEMPLATE_TEST_CASE("AdamW on the GPU follows AdamW on the host", "[cuda_ops]", float, double) {
  using T = TestType;
  AdamWConfig c;
  c.lr = 1e-2;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.eps = 1e-8;
  c.weight_decay = 0.1;
  ParamStore<T, Host> host;
  ParamStore<T, Cuda> dev;
  host.add("w", {37, 11}, /*decay=*/true);
  host.add("norm", {13}, /*decay=*/false);
  dev.add("w", {37, 11}, true);
  dev.add("norm", {13}, false);
  host.allocate();
  dev.allocate();
  const std::vector<T> init = random_vec<T>(std::size_t(host.num_elements()), 70);
  host.set_values(init);
  dev.set_values(init);
  AdamW<T, Host> ho(c, host);
  AdamW<T, Cuda> dopt(c, dev);
  for (std::int64_t step = 0; step < 4; ++step) {
    const double lr = learning_rate(c, step);
    const std::vector<T> g = random_vec<T>(std::size_t(host.num_elements()), 100 + step);
    std::copy(g.begin(), g.end(), host.grads());
    Cuda::upload(dev.grads(), g.data(), g.size());
    ho.step(host, step, lr);
    dopt.step(dev, step, lr);
  }
  DeviceBuffer<T> values = to_device(dev.host_values());
  check_close("values", values, host.host_values());
  check_close("m", dopt.m(), ho.m());
  check_close("v", dopt.v(), ho.v());
}

TEMPLATE_TEST_CASE("cuda sum_squares and scale match the host's grad_norm and scale", "[cuda_ops]",
                   float, double) {
  using T = TestType;
  for (const i64 n : {i64(1), i64(5), i64(1000), i64(300001)}) {
    INFO("n " << n);
    ParamStore<T, Host> ps;
    ps.add("g", {n}, true);
    ps.allocate();
    const std::vector<T> g = random_vec<T>(std::size_t(n), 80);
    std::copy(g.begin(), g.end(), ps.grads());
    auto g_ = to_device(g);
    const double norm = grad_norm(ps);
    const double sq = ops::sum_squares(Cuda{}, g_.data(), n);
    // Squares of T values summed in double on both sides: only the order differs.
    check_close_scalar("sum of squares", sq, norm * norm, 1e-12);
    CHECK(ops::sum_squares(Cuda{}, g_.data(), n) == sq);  // deterministic

    const double max_norm = norm / 3;
    ops::scale(Host{}, ps.grads(), n, clip_factor(norm, max_norm));  // max_norm / norm
    ops::scale(Cuda{}, g_.data(), n, max_norm / norm);
    check_close("scaled", g_, ps.host_grads());
  }
  CHECK(ops::sum_squares(Cuda{}, static_cast<const T*>(nullptr), 0) == 0.0);
}

// ---------------------------------------------------------------------------------------
// The ops of the gated attention layer and the MoE block (rope, bias, attention, moe):
// against the host op, at the looser tolerance of gpu_support.h (1e-4 fp32, 1e-10 fp64),
// with the exact checks where the result is a copy or a choice.

namespace {

template <typename T>
void check_near(const std::string& what, const DeviceBuffer<T>& got, const std::vector<T>& want) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  const std::vector<T> g = to_host<Cuda>(got);
  const double err = rel_l2(g.data(), want.data(), want.size());
  INFO("relative error " << err);
  CHECK(err <= gdn::test::tolerance<T>());
}

// The host array for the host op, its device copy for the CUDA one: a test's lambda over
// the device tag then runs the same call on both.
template <typename H, typename D>
auto pick(Host, H& host, D&) {
  return host.data();
}
template <typename H, typename D>
auto pick(Cuda, H&, D& device) {
  return device.data();
}

// Query positions of a rank holding two chunks, as the layer-local balance makes them:
// [a0, a1) and [b0, b1), ascending.
std::vector<i64> two_chunks(i64 a0, i64 a1, i64 b0, i64 b1) {
  std::vector<i64> pos;
  for (i64 t = a0; t < a1; ++t) pos.push_back(t);
  for (i64 t = b0; t < b1; ++t) pos.push_back(t);
  return pos;
}

}  // namespace

TEMPLATE_TEST_CASE("cuda rope matches the host, in place and not, forward and backward",
                   "[cuda_ops]", float, double) {
  using T = TestType;
  const i64 N = 37;
  const int H = 3;
  std::vector<i64> pos(static_cast<std::size_t>(N));
  for (i64 n = 0; n < N; ++n) pos[std::size_t(n)] = 1000 + 3 * n;  // large angles
  const auto d_pos = to_device(pos);
  for (auto [D, R] : {std::pair{10, 6}, std::pair{9, 0}, std::pair{8, 8}, std::pair{130, 64}}) {
    INFO("D " << D << " R " << R);
    const std::size_t n = std::size_t(N) * H * D;
    const auto x = random_vec<T>(n, 61);
    for (bool backward : {false, true}) {
      INFO((backward ? "backward" : "forward"));
      auto run = [&](auto dev, const T* in, T* out) {
        if (backward)
          ops::rope_backward(dev, in, pick(dev, pos, d_pos), N, H, D, R, 100.0, out);
        else
          ops::rope_forward(dev, in, pick(dev, pos, d_pos), N, H, D, R, 100.0, out);
      };
      std::vector<T> y(n);
      run(Host{}, x.data(), y.data());
      auto x_ = to_device(x), y_ = to_device(random_vec<T>(n, 62));  // y_ starts as garbage
      run(Cuda{}, x_.data(), y_.data());
      check_near("y", y_, y);
      run(Cuda{}, x_.data(), x_.data());  // in place
      check_near("y in place", x_, y);
    }
  }
}

TEMPLATE_TEST_CASE("cuda bias matches the host, db accumulates", "[cuda_ops]", float, double) {
  using T = TestType;
  const i64 N = 300;  // more than one block of the column sums
  const int out = 45;
  const auto y0 = random_vec<T>(std::size_t(N) * out, 71), b = random_vec<T>(std::size_t(out), 72);
  const auto dy = random_vec<T>(y0.size(), 73);
  auto y = y0, db = random_vec<T>(std::size_t(out), 74);  // db non-zero: accumulation
  ops::bias_add(Host{}, y.data(), b.data(), N, out);
  ops::bias_backward(Host{}, dy.data(), N, out, db.data());
  ops::bias_backward(Host{}, dy.data(), N, out, db.data());  // twice: adds again

  auto y_ = to_device(y0), b_ = to_device(b), dy_ = to_device(dy);
  auto db_ = to_device(random_vec<T>(std::size_t(out), 74));
  ops::bias_add(Cuda{}, y_.data(), b_.data(), N, out);
  CHECK(to_host<Cuda>(y_) == y);  // one addition per element: exact
  ops::bias_backward(Cuda{}, dy_.data(), N, out, db_.data());
  ops::bias_backward(Cuda{}, dy_.data(), N, out, db_.data());
  check_near("db", db_, db);
}

TEMPLATE_TEST_CASE("cuda attention matches the host: GQA, two query tiles, key tiles", "[cuda_ops]",
                   float, double) {
  using T = TestType;
  struct Case {
    int B;
    i64 Tk;
    int Hq, Hkv, D;
    std::vector<i64> qpos;
  };
  // Query rows that do not start at 0 (a balanced rank's two chunks), keys past the last
  // query (their dk, dv are zero); more keys and more head_dim than a block has threads.
  const std::vector<Case> cases = {
      {2, 27, 6, 2, 7, two_chunks(5, 10, 20, 25)},
      {1, 300, 4, 1, 130, two_chunks(0, 3, 140, 299)},
      {3, 9, 2, 2, 5, two_chunks(8, 9, 9, 9)},  // one query row, the last key
  };
  for (const Case& c : cases) {
    const i64 Tq = i64(c.qpos.size());
    INFO("B " << c.B << " Tq " << Tq << " Tk " << c.Tk << " Hq " << c.Hq << " Hkv " << c.Hkv
              << " D " << c.D);
    const std::size_t nq = std::size_t(c.B * Tq) * c.Hq * c.D,
                      nk = std::size_t(c.B * c.Tk) * c.Hkv * c.D;
    const std::size_t nl = std::size_t(c.B * Tq) * c.Hq;
    const double scale = 1.0 / std::sqrt(double(c.D));
    auto q = random_vec<T>(nq, 81), k = random_vec<T>(nk, 82), v = random_vec<T>(nk, 83);
    auto dout = random_vec<T>(nq, 84);
    auto qpos = c.qpos;
    std::vector<T> o(nq), lse(nl), dq(nq), dk(nk), dv(nk);
    auto q_ = to_device(q), k_ = to_device(k), v_ = to_device(v), dout_ = to_device(dout);
    auto qpos_ = to_device(qpos);
    // Outputs start as garbage: all of them are overwritten.
    auto o_ = to_device(random_vec<T>(nq, 85)), lse_ = to_device(random_vec<T>(nl, 86));
    auto dq_ = to_device(random_vec<T>(nq, 87)), dk_ = to_device(random_vec<T>(nk, 88)),
         dv_ = to_device(random_vec<T>(nk, 89));
    auto forward = [&](auto dev) {
      ops::attention_forward(dev, Precision::plain, pick(dev, q, q_), pick(dev, k, k_),
                             pick(dev, v, v_), pick(dev, qpos, qpos_), c.B, Tq, c.Tk, c.Hq, c.Hkv,
                             c.D, scale, pick(dev, o, o_), pick(dev, lse, lse_));
    };
    auto backward = [&](auto dev, bool want_dq, bool want_dkv) {
      ops::attention_backward(
          dev, Precision::plain, pick(dev, q, q_), pick(dev, k, k_), pick(dev, v, v_),
          pick(dev, o, o_), pick(dev, lse, lse_), pick(dev, dout, dout_), pick(dev, qpos, qpos_),
          c.B, Tq, c.Tk, c.Hq, c.Hkv, c.D, scale, want_dq ? pick(dev, dq, dq_) : nullptr,
          want_dkv ? pick(dev, dk, dk_) : nullptr, want_dkv ? pick(dev, dv, dv_) : nullptr);
    };
    forward(Host{});
    backward(Host{}, true, true);
    forward(Cuda{});
    check_near("o", o_, o);
    check_near("lse", lse_, lse);
    backward(Cuda{}, true, true);
    check_near("dq", dq_, dq);
    check_near("dk", dk_, dk);
    check_near("dv", dv_, dv);
    // Keys no query reaches get exact zeros.
    const i64 last = *std::max_element(qpos.begin(), qpos.end());
    const std::vector<T> hk = to_host<Cuda>(dk_);
    for (int b = 0; b < c.B; ++b)
      for (std::size_t e = std::size_t(b * c.Tk + last + 1) * c.Hkv * c.D;
           e < std::size_t(b + 1) * c.Tk * c.Hkv * c.D; ++e)
        REQUIRE(hk[e] == T(0));
    // Either half of the backward alone gives the same numbers.
    dq_ = to_device(random_vec<T>(nq, 90));
    backward(Cuda{}, true, false);
    check_near("dq alone", dq_, dq);
    dk_ = to_device(random_vec<T>(nk, 91));
    dv_ = to_device(random_vec<T>(nk, 92));
    backward(Cuda{}, false, true);
    check_near("dk alone", dk_, dk);
    check_near("dv alone", dv_, dv);
  }
}

// The float op's flash kernels (bf16 operands, fp32 accumulation: flash_attention_cuda.cu)
// against the host op in fp64, at the bounds test_flash_attention derives and checks for
// their CPU emulation: o 1e-2, lse 2e-3, dq, dk, dv 2e-2. The op takes them in the bf16
// mode; there it must give the direct calls' bits (no atomics: the same order each run).
TEST_CASE("cuda flash attention matches the host in fp64: GQA, stripes, documents, D 256",
          "[cuda_ops]") {
  struct Case {
    const char* name;
    int B;
    std::vector<i64> qpos, kstart;  // kstart empty: no documents
    i64 Tk;
    int Hq, Hkv, D;
  };
  auto span = [](i64 lo, i64 hi) { return two_chunks(lo, hi, hi, hi); };
  // kstart of rows 0..T-1 of one batch row cut into documents at the given starts.
  auto docs = [](i64 T, const std::vector<i64>& starts) {
    std::vector<i64> ks(static_cast<std::size_t>(T));
    for (i64 i = 0; i < T; ++i)
      for (i64 s : starts)
        if (s <= i) ks[std::size_t(i)] = s;
    return ks;
  };
  std::vector<i64> documents = docs(190, {0, 70, 130}), row1 = docs(190, {0, 20, 150});
  documents.insert(documents.end(), row1.begin(), row1.end());
  const std::vector<Case> cases = {
      {"causal, keys past the last query", 2, span(0, 150), {}, 170, 4, 1, 64},
      {"two stripes, D 40", 1, two_chunks(0, 50, 150, 200), {}, 200, 4, 1, 40},
      {"documents, D 96", 2, span(0, 190), documents, 190, 8, 2, 96},
      {"D 256", 1, span(0, 100), {}, 100, 4, 1, 256},
      {"D 128, one query row", 1, span(70, 71), {}, 75, 2, 2, 128},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const i64 Tq = i64(c.qpos.size());
    const std::size_t nq = std::size_t(c.B * Tq) * c.Hq * c.D,
                      nk = std::size_t(c.B * c.Tk) * c.Hkv * c.D, nl = std::size_t(c.B * Tq) * c.Hq;
    const double scale = 1.0 / std::sqrt(double(c.D));
    const auto q = random_vec<float>(nq, 101, 1.5), k = random_vec<float>(nk, 102),
               v = random_vec<float>(nk, 103), dout = random_vec<float>(nq, 104);
    const std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()),
        vd(v.begin(), v.end()), gd(dout.begin(), dout.end());
    const i64* ks_host = c.kstart.empty() ? nullptr : c.kstart.data();
    std::vector<double> o(nq), lse(nl), dq(nq), dk(nk), dv(nk);
    ops::attention_forward(Host{}, Precision::plain, qd.data(), kd.data(), vd.data(), c.qpos.data(),
                           c.B, Tq, c.Tk, c.Hq, c.Hkv, c.D, scale, o.data(), lse.data(), ks_host);
    ops::attention_backward(Host{}, Precision::plain, qd.data(), kd.data(), vd.data(), o.data(),
                            lse.data(), gd.data(), c.qpos.data(), c.B, Tq, c.Tk, c.Hq, c.Hkv, c.D,
                            scale, dq.data(), dk.data(), dv.data(), ks_host);
    auto q_ = to_device(q), k_ = to_device(k), v_ = to_device(v), dout_ = to_device(dout);
    auto qpos_ = to_device(c.qpos);
    DeviceBuffer<i64> kstart_;
    if (ks_host) kstart_ = to_device(c.kstart);
    const i64* ks_dev = ks_host ? kstart_.data() : nullptr;
    // Outputs start as garbage: all of them are overwritten.
    auto o_ = to_device(random_vec<float>(nq, 105)), lse_ = to_device(random_vec<float>(nl, 106));
    auto dq_ = to_device(random_vec<float>(nq, 107)), dk_ = to_device(random_vec<float>(nk, 108)),
         dv_ = to_device(random_vec<float>(nk, 109));
    ops::flash_attention_forward(Cuda{}, q_.data(), k_.data(), v_.data(), qpos_.data(), c.B, Tq,
                                 c.Tk, c.Hq, c.Hkv, c.D, scale, o_.data(), lse_.data(), ks_dev);
    ops::flash_attention_backward(Cuda{}, q_.data(), k_.data(), v_.data(), o_.data(), lse_.data(),
                                  dout_.data(), qpos_.data(), c.B, Tq, c.Tk, c.Hq, c.Hkv, c.D,
                                  scale, dq_.data(), dk_.data(), dv_.data(), ks_dev);
    gdn::test::check_close("o", o_, o.data(), nq, 1e-2);
    gdn::test::check_close("lse", lse_, lse.data(), nl, 2e-3);
    gdn::test::check_close("dq", dq_, dq.data(), nq, 2e-2);
    gdn::test::check_close("dk", dk_, dk.data(), nk, 2e-2);
    gdn::test::check_close("dv", dv_, dv.data(), nk, 2e-2);
#if GDN_HAVE_CUDNN
    {
      // cuDNN's fused attention (cudnn_attention.h: the same cases as ragged segments, two
      // waves for the stripes) at the flash kernels' bounds; cuDNN >= 9.5 on sm_90 takes
      // every case here, so a refusal fails, naming cuDNN's reason.
      auto o4 = to_device(random_vec<float>(nq, 120)), lse4 = to_device(random_vec<float>(nl, 121));
      auto dq4 = to_device(random_vec<float>(nq, 122)), dk4 = to_device(random_vec<float>(nk, 123)),
           dv4 = to_device(random_vec<float>(nk, 124));
      const bool fwd =
          ops::cudnn_attention_forward(q_.data(), k_.data(), v_.data(), qpos_.data(), c.B, Tq, c.Tk,
                                       c.Hq, c.Hkv, c.D, scale, o4.data(), lse4.data(), ks_dev);
      const bool bwd = fwd && ops::cudnn_attention_backward(
                                  q_.data(), k_.data(), v_.data(), o4.data(), lse4.data(),
                                  dout_.data(), qpos_.data(), c.B, Tq, c.Tk, c.Hq, c.Hkv, c.D,
                                  scale, dq4.data(), dk4.data(), dv4.data(), ks_dev);
      std::string why;
      for (const std::string& n : ops::take_cudnn_attention_notes()) why += n + "; ";
      INFO("cuDNN: " << why);
      REQUIRE(bwd);
      gdn::test::check_close("cudnn o", o4, o.data(), nq, 1e-2);
      gdn::test::check_close("cudnn lse", lse4, lse.data(), nl, 2e-3);
      gdn::test::check_close("cudnn dq", dq4, dq.data(), nq, 2e-2);
      gdn::test::check_close("cudnn dk", dk4, dk.data(), nk, 2e-2);
      gdn::test::check_close("cudnn dv", dv4, dv.data(), nk, 2e-2);
    }
#endif
    // The op in the bf16 mode with attention_backend flash runs the same kernels.
    const Precision mode = Precision::bf16;
    ops::set_attention_backend(ops::AttentionBackend::flash);
    REQUIRE(ops::flash_attention_chosen(c.D, mode));
    auto o2 = to_device(random_vec<float>(nq, 110)), lse2 = to_device(random_vec<float>(nl, 111));
    auto dq2 = to_device(random_vec<float>(nq, 112)), dk2 = to_device(random_vec<float>(nk, 113)),
         dv2 = to_device(random_vec<float>(nk, 114));
    ops::attention_forward(Cuda{}, mode, q_.data(), k_.data(), v_.data(), qpos_.data(), c.B, Tq,
                           c.Tk, c.Hq, c.Hkv, c.D, scale, o2.data(), lse2.data(), ks_dev);
    ops::attention_backward(Cuda{}, mode, q_.data(), k_.data(), v_.data(), o2.data(), lse2.data(),
                            dout_.data(), qpos_.data(), c.B, Tq, c.Tk, c.Hq, c.Hkv, c.D, scale,
                            dq2.data(), dk2.data(), dv2.data(), ks_dev);
    ops::set_attention_backend(ops::AttentionBackend::automatic);
    CHECK(to_host<Cuda>(o2) == to_host<Cuda>(o_));
    CHECK(to_host<Cuda>(lse2) == to_host<Cuda>(lse_));
    CHECK(to_host<Cuda>(dq2) == to_host<Cuda>(dq_));
    CHECK(to_host<Cuda>(dk2) == to_host<Cuda>(dk_));
    CHECK(to_host<Cuda>(dv2) == to_host<Cuda>(dv_));
    // q, k, v in bf16 in global memory (the forward's K and V by cp.async, two stages): the
    // float inputs' bits, which the kernels round the same way as they stage them.
    auto narrow = [](const std::vector<float>& x) {
      std::vector<Bf16> y(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) y[i] = to_bf16(x[i]);
      return to_device(y);
    };
    auto q16 = narrow(q), k16 = narrow(k), v16 = narrow(v);
    auto o3 = to_device(random_vec<float>(nq, 115)), lse3 = to_device(random_vec<float>(nl, 116));
    auto dq3 = to_device(random_vec<float>(nq, 117)), dk3 = to_device(random_vec<float>(nk, 118)),
         dv3 = to_device(random_vec<float>(nk, 119));
    ops::flash_attention_forward(Cuda{}, q16.data(), k16.data(), v16.data(), qpos_.data(), c.B, Tq,
                                 c.Tk, c.Hq, c.Hkv, c.D, scale, o3.data(), lse3.data(), ks_dev);
    ops::flash_attention_backward(Cuda{}, q16.data(), k16.data(), v16.data(), o3.data(),
                                  lse3.data(), dout_.data(), qpos_.data(), c.B, Tq, c.Tk, c.Hq,
                                  c.Hkv, c.D, scale, dq3.data(), dk3.data(), dv3.data(), ks_dev);
    CHECK(to_host<Cuda>(o3) == to_host<Cuda>(o_));
    CHECK(to_host<Cuda>(lse3) == to_host<Cuda>(lse_));
    CHECK(to_host<Cuda>(dq3) == to_host<Cuda>(dq_));
    CHECK(to_host<Cuda>(dk3) == to_host<Cuda>(dk_));
    CHECK(to_host<Cuda>(dv3) == to_host<Cuda>(dv_));
  }
}

TEST_CASE("cuda attention rejects bad heads; its caller's check rejects bad positions",
          "[cuda_ops]") {
  // The op copies nothing to the host: the positions are checked where they are made
  // (AttentionContextParallel, by check_attention_positions on its host copies).
  const std::vector<i64> qpos = {0, 4};  // Tk = 4: position 4 has no key
  CHECK_THROWS_WITH(ops::check_attention_positions(qpos.data(), nullptr, 1, 2, 4),
                    Catch::Contains("qpos[1] = 4"));
  const auto qpos_ = to_device(std::vector<i64>{0, 3});
  DeviceBuffer<float> q(3 * 2 * 2), k(4 * 2 * 2), v(4 * 2 * 2), o(3 * 2 * 2), lse(3 * 2);
  CHECK_THROWS_WITH(
      ops::attention_forward(Cuda{}, Precision::plain, q.data(), k.data(), v.data(), qpos_.data(),
                             1, 2, 4, 3, 2, 2, 1.0, o.data(), lse.data()),
      Catch::Contains("Hq = 3"));
}

TEMPLATE_TEST_CASE("cuda MoE router matches the host: top-k choice, ties, backward", "[cuda_ops]",
                   float, double) {
  using T = TestType;
  const i64 N = 37;
  const int E = 7, k = 3;
  auto logits = random_vec<T>(std::size_t(N) * E, 101, 2.0);
  // Row 0: experts 1, 2 and 4 tie at the top, 6 just below; row 1: all equal. The ties go
  // to the lower index on both devices (the probabilities of equal logits are equal).
  for (int e = 0; e < E; ++e) logits[std::size_t(e)] = T(e == 1 || e == 2 || e == 4 ? 1.5 : 0.1);
  logits[6] = T(1.25);
  for (int e = 0; e < E; ++e) logits[std::size_t(E + e)] = T(0.3);
  const auto dweights = random_vec<T>(std::size_t(N) * k, 102);
  std::vector<double> dprob_all = random_vec<double>(std::size_t(E), 103);
  auto logits_ = to_device(logits), dweights_ = to_device(dweights);
  auto dprob_all_ = to_device(dprob_all);
  for (bool renorm : {false, true}) {
    INFO("renorm " << renorm);
    std::vector<T> probs(std::size_t(N) * E), weights(std::size_t(N) * k);
    std::vector<std::int32_t> idx(std::size_t(N) * k);
    ops::router_forward(Host{}, logits.data(), N, E, k, renorm, probs.data(), idx.data(),
                        weights.data());
    DeviceBuffer<T> probs_(probs.size()), weights_(weights.size());
    DeviceBuffer<std::int32_t> idx_(idx.size());
    ops::router_forward(Cuda{}, logits_.data(), N, E, k, renorm, probs_.data(), idx_.data(),
                        weights_.data());
    check_near("probs", probs_, probs);
    check_near("weights", weights_, weights);
    const std::vector<std::int32_t> got = to_host<Cuda>(idx_);
    CHECK(got == idx);  // the same choices, in the same order
    CHECK(std::vector<std::int32_t>(got.begin(), got.begin() + 2 * k) ==
          std::vector<std::int32_t>{1, 2, 4, 0, 1, 2});
    for (bool lb_loss : {false, true}) {
      INFO("load-balancing gradient " << lb_loss);
      std::vector<T> dlogits(probs.size());
      ops::router_backward(Host{}, probs.data(), idx.data(), dweights.data(), N, E, k, renorm,
                           lb_loss ? dprob_all.data() : nullptr, dlogits.data());
      auto dlogits_ = to_device(random_vec<T>(probs.size(), 104));
      // The device's own forward: its probabilities, the same choices.
      ops::router_backward(Cuda{}, probs_.data(), idx_.data(), dweights_.data(), N, E, k, renorm,
                           lb_loss ? dprob_all_.data() : nullptr, dlogits_.data());
      check_near("dlogits", dlogits_, dlogits);
    }
  }
}

TEST_CASE("cuda MoE router: NaN logits still give k distinct experts in range", "[cuda_ops]") {
  // A diverged step: the model groups rows by these choices before the loss is seen.
  const int E = 6, k = 4;
  std::vector<float> logits = {NAN, 0.5f, NAN, 0.2f, 0.9f, NAN};
  const auto logits_ = to_device(logits);
  DeviceBuffer<float> probs_(static_cast<std::size_t>(E)), weights_(static_cast<std::size_t>(k));
  DeviceBuffer<std::int32_t> idx_(static_cast<std::size_t>(k));
  ops::router_forward(Cuda{}, logits_.data(), 1, E, k, true, probs_.data(), idx_.data(),
                      weights_.data());
  std::vector<std::int32_t> idx = to_host<Cuda>(idx_);
  for (std::int32_t e : idx) CHECK((e >= 0 && e < E));
  std::sort(idx.begin(), idx.end());
  CHECK(std::adjacent_find(idx.begin(), idx.end()) == idx.end());
}

TEMPLATE_TEST_CASE("cuda MoE row moves, dots and the shared expert's gate match the host",
                   "[cuda_ops]", float, double) {
  using T = TestType;
  const i64 N = 41, n = 17;
  const int d = 45;  // more than a warp
  // n distinct rows of N, out of order.
  std::vector<i64> rows;
  for (i64 i = 0; i < n; ++i) rows.push_back((i * 12 + 5) % N);
  const auto src = random_vec<T>(std::size_t(N) * d, 111),
             x = random_vec<T>(std::size_t(n) * d, 112);
  const auto s = random_vec<T>(std::size_t(n), 113), y0 = random_vec<T>(std::size_t(N) * d, 114);
  auto src_ = to_device(src), x_ = to_device(x), s_ = to_device(s), rows_ = to_device(rows);

  std::vector<T> g(std::size_t(n) * d);
  ops::gather_rows(Host{}, src.data(), rows.data(), n, d, g.data());
  DeviceBuffer<T> g_(g.size());
  ops::gather_rows(Cuda{}, src_.data(), rows_.data(), n, d, g_.data());
  CHECK(to_host<Cuda>(g_) == g);  // a copy: exact

  for (bool scaled : {false, true}) {
    INFO("scaled " << scaled);
    auto y = y0;
    ops::scatter_add_rows(Host{}, x.data(), rows.data(), scaled ? s.data() : nullptr, n, d,
                          y.data());
    auto y_ = to_device(y0);
    ops::scatter_add_rows(Cuda{}, x_.data(), rows_.data(), scaled ? s_.data() : nullptr, n, d,
                          y_.data());
    check_near("scatter_add_rows", y_, y);
  }

  std::vector<T> dots(static_cast<std::size_t>(n)), scaled(x.size());
  ops::row_dots(Host{}, x.data(), g.data(), n, d, dots.data());
  ops::scale_rows(Host{}, x.data(), s.data(), n, d, scaled.data());
  DeviceBuffer<T> dots_(dots.size());
  ops::row_dots(Cuda{}, x_.data(), g_.data(), n, d, dots_.data());
  check_near("row_dots", dots_, dots);
  ops::scale_rows(Cuda{}, x_.data(), s_.data(), n, d, x_.data());  // in place
  CHECK(to_host<Cuda>(x_) == scaled);                              // one product per element: exact

  // The shared expert's gate: N rows of d, z one logit per row.
  const auto se = random_vec<T>(std::size_t(N) * d, 115), z = random_vec<T>(std::size_t(N), 116);
  const auto dy = random_vec<T>(se.size(), 117);
  auto y = y0;
  std::vector<T> ds(se.size()), dz(static_cast<std::size_t>(N));
  ops::shared_gate_forward(Host{}, se.data(), z.data(), N, d, y.data());
  ops::shared_gate_backward(Host{}, se.data(), z.data(), dy.data(), N, d, ds.data(), dz.data());
  auto se_ = to_device(se), z_ = to_device(z), dy_ = to_device(dy), y_ = to_device(y0);
  auto ds_ = to_device(random_vec<T>(ds.size(), 118)),
       dz_ = to_device(random_vec<T>(dz.size(), 119));
  ops::shared_gate_forward(Cuda{}, se_.data(), z_.data(), N, d, y_.data());
  check_near("shared gate y", y_, y);
  ops::shared_gate_backward(Cuda{}, se_.data(), z_.data(), dy_.data(), N, d, ds_.data(),
                            dz_.data());
  check_near("shared gate ds", ds_, ds);
  check_near("shared gate dz", dz_, dz);
}

// The device-side MoE routing (ops/moe_route) and the grouped expert linears
// (ops/grouped_linear) against their host versions. Routing: exactly (offsets, rows,
// choice and slot are integers; the counts are exact). moe_combine: one fma per add on the
// GPU, so 1e-5 / 1e-12. router_stats: the counts exactly, the sums (blocked order) at
// 1e-12. The grouped GEMMs: fp64 SIMT at 1e-12, fp32 SIMT at 1e-5, and in Precision::bf16
// (bf16 operands on both sides, fp32 sums in another order) at 1e-5.
namespace {}  // namespace

TEST_CASE("cuda moe_route groups the entries as the host does, stably", "[cuda_ops]") {
  // (N, k, E, used): empty experts, several rounds of a block (N k > 4096), E = 512.
  for (auto [N, k, E, used] : {std::tuple{0, 2, 5, 5}, std::tuple{37, 3, 9, 6},
                               std::tuple{3000, 3, 40, 33}, std::tuple{700, 10, 512, 512}}) {
    INFO("N " << N << " k " << k << " E " << E);
    const std::vector<std::int32_t> idx = test::random_expert_ids(N, k, used, 31 + N);
    const std::size_t R = idx.size();
    std::vector<i64> off(std::size_t(E) + 1), rows(R), choice(R), slot(R);
    ops::moe_route(Host{}, idx.data(), N, k, E, off.data(), rows.data(), choice.data(),
                   slot.data());
    const auto idx_ = to_device(idx);
    DeviceBuffer<i64> off_(off.size()), rows_(R), choice_(R), slot_(R);
    ops::moe_route(Cuda{}, idx_.data(), N, k, E, off_.data(), rows_.data(), choice_.data(),
                   slot_.data());
    CHECK(to_host<Cuda>(off_) == off);
    CHECK(to_host<Cuda>(rows_) == rows);
    CHECK(to_host<Cuda>(choice_) == choice);
    CHECK(to_host<Cuda>(slot_) == slot);
  }
}

TEMPLATE_TEST_CASE("cuda moe_combine and router_stats match the host", "[cuda_ops]", float,
                   double) {
  using T = TestType;
  const i64 N = 300;
  const int k = 4, E = 50, d = 300;  // d over a block of threads
  const std::vector<std::int32_t> idx = test::random_expert_ids(N, k, E - 3, 41);
  const std::size_t R = idx.size();
  std::vector<i64> off(std::size_t(E) + 1), rows(R), choice(R), slot(R);
  ops::moe_route(Host{}, idx.data(), N, k, E, off.data(), rows.data(), choice.data(), slot.data());
  const auto src = random_vec<T>(R * d, 42), scale = random_vec<T>(R, 43);
  const auto y0 = random_vec<T>(std::size_t(N) * d, 44);
  const auto src_ = to_device(src), scale_ = to_device(scale), slot_ = to_device(slot);
  for (bool scaled : {false, true}) {
    INFO("scaled " << scaled);
    std::vector<T> y = y0;
    ops::moe_combine(Host{}, src.data(), slot.data(), scaled ? scale.data() : nullptr, N, k, d,
                     y.data());
    auto y_ = to_device(y0);
    ops::moe_combine(Cuda{}, src_.data(), slot_.data(), scaled ? scale_.data() : nullptr, N, k, d,
                     y_.data());
    check_close("moe_combine", y_, y);
  }
  const auto probs = random_vec<T>(std::size_t(N) * E, 45, 1.0, 3.0);
  std::vector<double> stats(std::size_t(2 * E));
  ops::router_stats(Host{}, probs.data(), off.data(), N, E, stats.data());
  const auto probs_ = to_device(probs), off_ = to_device(off);
  auto stats_ = to_device(random_vec<double>(stats.size(), 46));  // overwritten
  ops::router_stats(Cuda{}, probs_.data(), off_.data(), N, E, stats_.data());
  const std::vector<double> got = to_host<Cuda>(stats_);
  CHECK(std::vector<double>(got.begin(), got.begin() + E) ==
        std::vector<double>(stats.begin(), stats.begin() + E));
  CHECK(rel_l2(got.data() + E, stats.data() + E, std::size_t(E)) <= 1e-12);
}

TEMPLATE_TEST_CASE("cuda grouped linear matches the host's per-expert linears", "[cuda_ops]", float,
                   double) {
  using T = TestType;
  // Rows over 3 row tiles for expert 0, empty experts, one row; 3 column tiles of out.
  const int in = 70, out = 130, E = 6;
  const std::vector<i64> counts = {150, 0, 1, 64, 0, 37};
  std::vector<i64> off = {0};
  for (i64 c : counts) off.push_back(off.back() + c);
  const i64 R = off.back(), stride = 2 * i64(out) * in;  // a slice of a fused weight
  const auto x = random_vec<T>(std::size_t(R) * in, 51),
             dy = random_vec<T>(std::size_t(R) * out, 52);
  const auto W = random_vec<T>(std::size_t(E * stride), 53), dW0 = random_vec<T>(W.size(), 54);
  const auto x_ = to_device(x), dy_ = to_device(dy), W_ = to_device(W), off_ = to_device(off);
  // The bf16 mode on our tile (fp32 sums and outputs: the host's numbers up to the order of
  // the sums) and on cuBLAS's grouped GEMM (bf16 products: one more rounding, 2^-9).
  struct Case {
    bool bf16;
    ops::GroupedKernel kernel;
    double tol;
  };
  for (const Case c :
       {Case{false, ops::GroupedKernel::library, 1e-5}, Case{true, ops::GroupedKernel::tile, 1e-5},
        Case{true, ops::GroupedKernel::library, 4e-3}}) {
    const bool bf16 = c.bf16;
    if (bf16 && sizeof(T) == 8) continue;  // fp64 has no bf16 mode (as linear_cuda)
    INFO("bf16 " << bf16 << ", library " << (c.kernel == ops::GroupedKernel::library));
    ops::set_grouped_kernel(c.kernel);
    const Precision mode = precision_of(bf16);
    const double tol = sizeof(T) == 4 ? c.tol : 1e-12;
    std::vector<T> y(std::size_t(R) * out), dx(x.size()), dW = dW0;
    ops::grouped_linear_forward(Host{}, mode, x.data(), W.data() + out * in, stride, off.data(), E,
                                R, in, out, y.data());
    ops::grouped_linear_backward(Host{}, mode, x.data(), W.data() + out * in, stride, dy.data(),
                                 off.data(), E, R, in, out, dx.data(), dW.data() + out * in);
    auto y_ = to_device(random_vec<T>(y.size(), 55)), dx_ = to_device(random_vec<T>(dx.size(), 56));
    auto dW_ = to_device(dW0);
    ops::grouped_linear_forward(Cuda{}, mode, x_.data(), W_.data() + out * in, stride, off_.data(),
                                E, R, in, out, y_.data());
    ops::grouped_linear_backward(Cuda{}, mode, x_.data(), W_.data() + out * in, stride, dy_.data(),
                                 off_.data(), E, R, in, out, dx_.data(), dW_.data() + out * in);
    const std::vector<T> gy = to_host<Cuda>(y_), gdx = to_host<Cuda>(dx_), gdW = to_host<Cuda>(dW_);
    CHECK(rel_l2(gy.data(), y.data(), y.size()) <= tol);
    CHECK(rel_l2(gdx.data(), dx.data(), dx.size()) <= tol);
    CHECK(rel_l2(gdW.data(), dW.data(), dW.size()) <= tol);
    // What no expert owns stays as it was: the gate halves and the empty experts' slices.
    for (int e = 0; e < E; ++e) {
      const i64 end = e * stride + (counts[std::size_t(e)] == 0 ? 2 : 1) * i64(out) * in;
      CHECK(std::equal(gdW.begin() + e * stride, gdW.begin() + end, dW0.begin() + e * stride));
    }
  }
  ops::set_grouped_kernel(ops::GroupedKernel::library);
}
