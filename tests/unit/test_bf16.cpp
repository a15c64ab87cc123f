// The bf16 storage type and the GDN op's bf16 mode (gdn/bf16_op.h), on the host.
// - Conversion: every bf16 pattern widens and narrows back unchanged; narrowing random
//   floats picks the nearer of the two bf16 neighbours (ties to even), checked against an
//   oracle that compares distances in double rather than reusing the bit trick.
// - The op: on bf16 inputs it runs the float path on their exact float values, so its o is
//   ChunkedGdn<float>'s o rounded once to bf16, bit for bit, and its gradients (dO widened
//   from bf16) are ChunkedGdn<float>'s, bit for bit; and against the float op on the
//   unrounded inputs it stays within the stated bf16 tolerance (kBf16Tol).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/bf16.h"
#include "core/rng.h"
#include "gdn/head_groups.h"
#include "gdn/op/bf16_op.h"
#include "gdn/op/op.h"
#include "gdn/random_inputs.h"
#include "ops/convert/convert.h"
#include "ops/l2norm/l2norm.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

// bf16 keeps 8 significant bits: one rounding is at most 2^-9 relative. The op on rounded
// inputs against the float op on the unrounded ones: the input roundings, carried through
// the recurrence, plus o's own. Measured 3.2e-3 - 3.6e-3 (rel L2 of o, dq, dv) on these cases.
constexpr double kBf16Tol = 1e-2;

float bits_to_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// The value a bf16 pattern stands for, in double; 0x7f80 / 0xff80 (inf) count as +-2^128,
// the next value above the largest finite one, which is how IEEE rounding treats overflow.
double bf16_value(std::uint16_t b) {
  if ((b & 0x7fff) == 0x7f80) return (b & 0x8000 ? -1 : 1) * std::ldexp(1.0, 128);
  return double(bits_to_float(std::uint32_t(b) << 16));
}

std::vector<Bf16> narrow(const Tensor<float>& x) {
  std::vector<Bf16> y(x.data.size());
  ops::to_bf16(Host{}, x.ptr(), std::int64_t(y.size()), y.data());
  return y;
}
Tensor<float> widen(const std::vector<Bf16>& x, Shape s) {
  Tensor<float> y(std::move(s));
  ops::to_float(Host{}, x.data(), std::int64_t(x.size()), y.ptr());
  return y;
}

}  // namespace

TEST_CASE("bf16: every pattern widens exactly and narrows back", "[bf16]") {
  int nan = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float x = to_float(Bf16{std::uint16_t(b)});
    REQUIRE((bits_to_float(b << 16) == x || std::isnan(x)));
    const Bf16 back = to_bf16(x);
    if (std::isnan(x)) {
      ++nan;
      CHECK(std::isnan(to_float(back)));
      CHECK((back.bits & 0x8000) == (b & 0x8000));  // the sign stays
    } else {
      CHECK(back.bits == b);
    }
  }
  CHECK(nan == 2 * 127);  // exponent all ones, mantissa nonzero, either sign
}

TEST_CASE("bf16: narrowing rounds to the nearer neighbour, ties to even", "[bf16]") {
  Rng rng(7);
  auto check = [](std::uint32_t u) {
    const float x = bits_to_float(u);
    if (std::isnan(x)) return;
    const std::uint16_t lo = std::uint16_t(u >> 16);  // truncation: toward zero
    const std::uint16_t hi = std::uint16_t(lo + 1);   // the next one away from zero
    const Bf16 r = to_bf16(x);
    if ((u & 0xffff) == 0) {
      REQUIRE(r.bits == lo);  // exactly representable
      return;
    }
    const double dlo = std::fabs(double(x) - bf16_value(lo));
    const double dhi = std::fabs(double(x) - bf16_value(hi));
    const std::uint16_t want = dlo < dhi ? lo : dhi < dlo ? hi : (lo & 1 ? hi : lo);
    INFO("x bits " << u);
    REQUIRE(r.bits == want);
  };
  for (int i = 0; i < 200000; ++i) check(std::uint32_t(rng.next_u64()));
  // Ties, halfway cases just off a tie, subnormals, the overflow edge and zeros.
  for (std::uint32_t hi16 : {0x3f80u, 0x3f81u, 0x0001u, 0x0080u, 0x7f7fu, 0xbf80u, 0xff7fu})
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      check((hi16 << 16) | low);
  CHECK(to_bf16(std::numeric_limits<float>::max()).bits == 0x7f80);  // rounds up to inf
  CHECK(to_bf16(-std::numeric_limits<float>::infinity()).bits == 0xff80);
  CHECK(to_bf16(-0.0f).bits == 0x8000);
}

TEST_CASE("bf16: round_bf16 is to_float(to_bf16(x)), NaN included", "[bf16]") {
  Rng rng(11);
  auto check = [](std::uint32_t u) {
    const float x = bits_to_float(u), want = to_float(to_bf16(x)), got = round_bf16(x);
    INFO("x bits " << u);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
      REQUIRE(std::signbit(got) == std::signbit(x));
    } else {
      REQUIRE(std::memcmp(&got, &want, 4) == 0);  // -0 stays -0
    }
  };
  for (int i = 0; i < 200000; ++i) check(std::uint32_t(rng.next_u64()));
  for (std::uint32_t hi16 : {0x3f80u, 0x0001u, 0x7f7fu, 0x7f80u, 0x7f81u, 0xff80u, 0xffc0u})
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      check((hi16 << 16) | low);
  std::vector<double> v = {1.0 + 1.0 / 512, -3.14159};  // the double overload and the array op
  ops::round_to_bf16(Host{}, v.data(), 2);
  CHECK(v[0] == 1.0);  // the tie rounds to even
  CHECK(v[1] == double(to_float(to_bf16(-3.14159f))));
}

TEST_CASE("bf16 mode: the float op on the bf16 values, o rounded once", "[bf16]") {
  struct BfCase {
    const char* name;
    GdnProblem p;
    bool h0;
  };
  const std::vector<BfCase> cases = {
      {"B=2, T not a multiple of C, Hv = 2 Hk", make_problem(2, 150, 2, 4, 32, 32, 64), false},
      {"l2norm, h0, C=32, K != V", make_problem(1, 97, 1, 2, 16, 24, 32, true), true},
      {"packed sequences, l2norm, h0",
       make_problem(1, 140, 1, 2, 16, 16, 16, true, {0, 40, 41, 140}), true},
  };
  const BfCase c = GENERATE_REF(from_range(cases));
  DYNAMIC_SECTION(c.name) {
    const GdnProblem& p = c.p;
    const GdnInputs<float> d = random_gdn_inputs<float>(p, 11, c.h0);
    // The bf16 inputs and their exact float values.
    const std::vector<Bf16> q16 = narrow(d.q), k16 = narrow(d.k), v16 = narrow(d.v),
                            b16 = narrow(d.beta);
    GdnInputs<float> w = d;
    w.q = widen(q16, d.q.shape), w.k = widen(k16, d.k.shape), w.v = widen(v16, d.v.shape);
    w.beta = widen(b16, d.beta.shape);
    const Bf16Inputs in{q16.data(), k16.data(), v16.data(),
                        b16.data(), d.g.ptr(),  c.h0 ? d.h0.ptr() : nullptr};
    const Tensor<float> dO_full = random_tensor<float>(output_shape(p), 12);
    const std::vector<Bf16> dO16 = narrow(dO_full);
    const Tensor<float> dO = widen(dO16, output_shape(p));
    const Tensor<float> dht = random_tensor<float>(state_shape(p), 13, 0.1);

    std::vector<Bf16> o16(std::size_t(numel(output_shape(p))));
    Tensor<float> ht16(state_shape(p)), ht(state_shape(p)), o(output_shape(p));
    Grads<float> g16(p, c.h0), g(p, c.h0);
    {
      ChunkedGdnBf16<Host> op(p, in);
      op.forward(o16.data(), ht16.ptr());
      GdnGradView<float> gv = g16.view();
      op.backward(dO16.data(), dht.ptr(), gv);
    }
    {
      ChunkedGdn<float> op(p, w.view());
      op.forward(o.ptr(), ht.ptr());
      GdnGradView<float> gv = g.view();
      op.backward(dO.ptr(), dht.ptr(), gv);
    }
    const std::vector<Bf16> o_rounded = narrow(o);
    CHECK(std::memcmp(o16.data(), o_rounded.data(), 2 * o16.size()) == 0);
    CHECK(bit_difference(ht16, ht) == "");
    const auto got = g16.named(), want = g.named();
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO(want[i].first);
      CHECK(bit_difference(*got[i].second, *want[i].second) == "");
    }

    // Against the float op on the unrounded inputs (and dO): the stated tolerance.
    Tensor<float> o_full(output_shape(p));
    Grads<float> g_full(p, c.h0);
    {
      ChunkedGdn<float> op(p, d.view());
      op.forward(o_full.ptr(), nullptr);
      GdnGradView<float> gv = g_full.view();
      op.backward(dO_full.ptr(), dht.ptr(), gv);
    }
    const double err_o = rel_l2(widen(o16, output_shape(p)), o_full);
    INFO("rel L2 of o against the unrounded float op: " << err_o);
    CHECK(err_o > 0);  // the rounding happened
    CHECK(err_o <= kBf16Tol);
    CHECK(rel_l2(g16.dv, g_full.dv) <= kBf16Tol);
    CHECK(rel_l2(g16.dq, g_full.dq) <= kBf16Tol);
  }
}

// The bf16 op's last step on CUDA (gdn/head_groups.h's row function, which its kernel runs
// a row per thread): dq summed over a group's value heads, then the norm's backward from
// the bf16 input, against sum_head_groups and l2norm_rows_backward on the widened input,
// bit for bit.
TEST_CASE("the value heads' sum with the norm's backward from bf16 inputs", "[bf16]") {
  const int G = 3, dim = 40;
  const std::int64_t rows = 7, n = rows * dim;
  Rng rng(5);
  std::vector<float> per_head(G * n), x(n);
  for (float& e : per_head) e = float(rng.normal());
  std::vector<Bf16> x16(n);
  for (std::int64_t e = 0; e < n; ++e) {
    x16[e] = to_bf16(float(rng.normal()));
    x[e] = to_float(x16[e]);
  }
  std::vector<float> want(n), got(n, NAN);
  sum_head_groups(per_head.data(), n, G, want.data());
  ops::l2norm_rows_backward(Host{}, x.data(), want.data(), rows, dim, want.data());
  for (std::int64_t r = 0; r < rows; ++r)
    sum_head_group_row_l2norm(per_head.data(), n, r, dim, G, x16.data(), got.data());
  CHECK(bit_difference(got, want) == "");
}
