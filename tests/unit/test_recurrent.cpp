// The oracle's own oracle: the recurrence's hand-written backward, and the chunked
// backward, against central finite differences of the forward in fp64.
#include <catch2/catch.hpp>

#include "gdn/op/op.h"
#include "gdn/recurrent.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

// L = sum(o * dO) + sum(ht * dht): its gradient is exactly what the backward returns.
double loss(const GdnProblem& p, const GdnInputs<double>& d, const Tensor<double>& dO,
            const Tensor<double>& dht) {
  Tensor<double> o(output_shape(p)), ht(state_shape(p));
  recurrent_forward(p, d.view(), o.ptr(), ht.ptr());
  double s = 0;
  for (std::int64_t i = 0; i < o.size(); ++i) s += o.data[i] * dO.data[i];
  for (std::int64_t i = 0; i < ht.size(); ++i) s += ht.data[i] * dht.data[i];
  return s;
}

// Central differences for every element of every input, h0 included.
void check_against_finite_differences(const Case& c, bool chunked) {
  const GdnProblem& p = c.p;
  GdnInputs<double> d = random_gdn_inputs<double>(p, 11, /*with_h0=*/true);
  const Tensor<double> dO = random_tensor<double>(output_shape(p), 12);
  const Tensor<double> dht = random_tensor<double>(state_shape(p), 13);
  Grads<double> g(p, true);
  GdnGradView<double> gv = g.view();
  if (chunked) {
    ChunkedGdn<double> op(p, d.view());
    Tensor<double> o(output_shape(p)), ht(state_shape(p));
    op.forward(o.ptr(), ht.ptr());
    op.backward(dO.ptr(), dht.ptr(), gv);
  } else {
    recurrent_backward(p, d.view(), dO.ptr(), dht.ptr(), gv);
  }
  std::vector<std::pair<Tensor<double>*, const Tensor<double>*>> pairs = {
      {&d.q, &g.dq}, {&d.k, &g.dk},       {&d.v, &g.dv},
      {&d.g, &g.dg}, {&d.beta, &g.dbeta}, {&d.h0, &g.dh0}};
  const char* names[] = {"q", "k", "v", "g", "beta", "h0"};
  for (std::size_t t = 0; t < pairs.size(); ++t) {
    const std::vector<double> fd =
        finite_differences(pairs[t].first->data, [&] { return loss(p, d, dO, dht); });
    const double err = rel_l2(pairs[t].second->ptr(), fd.data(), fd.size());
    INFO(c.name << (chunked ? " chunked" : " recurrent") << " d" << names[t] << " rel err " << err);
    CHECK(err < 1e-7);
  }
}

const std::vector<Case> kSmallCases = {
    {"plain", make_problem(1, 9, 1, 1, 4, 3, 16), true, true},
    {"gqa Hv=2Hk, l2norm, B=2", make_problem(2, 7, 1, 2, 3, 5, 16, true), true, true},
    {"packed", make_problem(1, 12, 1, 2, 4, 4, 16, false, {0, 5, 6, 12}), true, true},
    {"two chunks", make_problem(1, 21, 2, 4, 3, 2, 16, true), true, true},
};

}  // namespace

TEST_CASE("recurrence backward matches finite differences (fp64, every input)", "[fd]") {
  const Case c = GENERATE(from_range(kSmallCases));
  DYNAMIC_SECTION(c.name) {
    check_against_finite_differences(c, false);
  }
}

TEST_CASE("chunked backward matches finite differences (fp64, every input)", "[fd]") {
  const Case c = GENERATE(from_range(kSmallCases));
  DYNAMIC_SECTION(c.name) {
    check_against_finite_differences(c, true);
  }
}

TEST_CASE("recurrence forward matches a hand-computed single step", "[recurrent]") {
  // One token, K = V = 1: S = e^g h0 + b k (v - e^g h0 k); o = s S q. Worked by hand.
  GdnProblem p = make_problem(1, 1, 1, 1, 1, 1, 16);
  p.scale = 0.5;
  const double q = 2, k = 0.5, v = 3, g = -0.25, beta = 0.8, h0 = 1.5;
  GdnInputView<double> in{&q, &k, &v, &g, &beta, &h0};
  double o = 0, ht = 0;
  recurrent_forward(p, in, &o, &ht);
  const double Sa = std::exp(g) * h0, S = Sa + beta * k * (v - Sa * k);
  CHECK(ht == Approx(S).epsilon(1e-15));
  CHECK(o == Approx(0.5 * S * q).epsilon(1e-15));
}
