// The chunked gated delta rule against the token-by-token recurrence (the oracle),
// forward and backward, in fp64 (<= 1e-10) and fp32 (<= 1e-5, against the fp64 oracle).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "gdn/op/op.h"
#include "gdn/recurrent.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

const std::vector<Case> kCases = {
    {"T not a multiple of C, B=2", make_problem(2, 100, 2, 2, 16, 16, 64), false, false},
    {"K != V, Hv = 2 Hk, C=16, h0, l2norm", make_problem(1, 77, 1, 2, 8, 24, 16, true), true, true},
    {"Hv = 4 Hk, C=32, h0, l2norm, B=2", make_problem(2, 130, 2, 8, 12, 10, 32, true), true, true},
    {"Hv = 4 Hk, C=64, no l2norm", make_problem(1, 200, 1, 4, 16, 8, 64), true, false},
    {"packed sequences", make_problem(1, 150, 1, 2, 16, 8, 16, true, {0, 10, 11, 80, 150}), true,
     true},
    {"packed, no h0, C=64", make_problem(1, 190, 2, 2, 8, 8, 64, false, {0, 64, 65, 190}), false,
     true},
    {"exact multiple of C", make_problem(1, 128, 1, 1, 32, 32, 64), false, false},
    {"C=128, K != V", make_problem(1, 300, 1, 1, 24, 40, 128, true), true, true},
};

struct Reference {
  Tensor<double> o, ht;
  Grads<double> grads;
};

Reference oracle(const Case& c, const GdnInputs<double>& d, const Tensor<double>& dO,
                 const Tensor<double>& dht) {
  Reference r{Tensor<double>(output_shape(c.p)), Tensor<double>(state_shape(c.p)),
              Grads<double>(c.p, c.h0)};
  recurrent_forward(c.p, d.view(), r.o.ptr(), r.ht.ptr());
  GdnGradView<double> gv = r.grads.view();
  recurrent_backward(c.p, d.view(), dO.ptr(), c.dht ? dht.ptr() : nullptr, gv);
  return r;
}

template <typename T>
void check_chunked(const Case& c, double tol, const std::vector<std::int64_t>& forget = {}) {
  GdnInputs<double> d = random_gdn_inputs<double>(c.p, 7, c.h0);
  forget_at(d, forget);
  const Tensor<double> dO = random_tensor<double>(output_shape(c.p), 8);
  const Tensor<double> dht = random_tensor<double>(state_shape(c.p), 9);
  const Reference ref = oracle(c, d, dO, dht);

  GdnInputs<T> dt{cast<T>(d.q), cast<T>(d.k),    cast<T>(d.v),
                  cast<T>(d.g), cast<T>(d.beta), cast<T>(d.h0)};
  const Tensor<T> dOt = cast<T>(dO), dhtt = cast<T>(dht);
  Tensor<T> o(output_shape(c.p)), ht(state_shape(c.p));
  Grads<T> g(c.p, c.h0);
  GdnGradView<T> gv = g.view();
  ChunkedGdn<T> op(c.p, dt.view());
  op.forward(o.ptr(), ht.ptr());
  op.backward(dOt.ptr(), c.dht ? dhtt.ptr() : nullptr, gv);

  INFO(c.name << " (" << (sizeof(T) == 8 ? "fp64" : "fp32") << ")");
  CHECK(rel_l2(o, ref.o) <= tol);
  CHECK(rel_l2(ht, ref.ht) <= tol);
  const auto got = g.named(), want = ref.grads.named();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = rel_l2(*got[i].second, *want[i].second);
    INFO(got[i].first << " rel err " << err);
    CHECK(err <= tol);
    for (const T x : got[i].second->data) REQUIRE(std::isfinite(double(x)));
  }
}

}  // namespace

TEST_CASE("chunked matches the recurrence in fp64", "[chunked]") {
  const Case c = GENERATE(from_range(kCases));
  DYNAMIC_SECTION(c.name) {
    check_chunked<double>(c, 1e-10);
  }
}

TEST_CASE("chunked fp32 matches the fp64 recurrence", "[chunked]") {
  const Case c = GENERATE(from_range(kCases));
  DYNAMIC_SECTION(c.name) {
    check_chunked<float>(c, 1e-5);
  }
}

TEST_CASE("g = -inf forgets the state: finite and exact against the recurrence", "[chunked]") {
  // Chunk starts and ends, two in a row, the very first token, a chunk with several.
  const std::vector<std::int64_t> forget = {0, 15, 16, 17, 40, 44, 47, 63, 64, 99};
  // The cases long enough for the last forget position.
  const Case c = GENERATE(filter([](const Case& k) { return k.p.T >= 100; }, from_range(kCases)));
  DYNAMIC_SECTION(c.name) {
    check_chunked<double>(c, 1e-10, forget);
    check_chunked<float>(c, 1e-5, forget);
  }
}

// Apart from the table above, so that it runs once.
TEST_CASE("g = -inf changes the output, so the forgetting test can fail", "[chunked]") {
  const Case& c = kCases[0];
  GdnInputs<double> d = random_gdn_inputs<double>(c.p, 7, false, /*g_scale=*/0.05);
  Tensor<double> o(output_shape(c.p)), o_forget(output_shape(c.p));
  chunk_forward(c.p, d.view(), o.ptr(), nullptr);
  forget_at(d, {40});
  chunk_forward(c.p, d.view(), o_forget.ptr(), nullptr);
  CHECK(rel_l2(o_forget, o) > 1e-2);
}

TEST_CASE("zero-length packed sequences: their final state is h0, dh0 is dht", "[chunked]") {
  const Case c{"empty sequences at the start, middle and end",
               make_problem(1, 70, 1, 2, 8, 8, 16, true, {0, 0, 10, 10, 10, 70, 70}), true, true};
  check_chunked<double>(c, 1e-10);
  check_chunked<float>(c, 1e-5);
  // The oracle itself says so: the empty sequence 3 ends where it started.
  const GdnInputs<double> d = random_gdn_inputs<double>(c.p, 7, true);
  Tensor<double> o(output_shape(c.p)), ht(state_shape(c.p));
  chunk_forward(c.p, d.view(), o.ptr(), ht.ptr());
  const std::int64_t block = std::int64_t(c.p.Hv) * c.p.K * c.p.V;
  for (const int n : {0, 2, 3, 5})
    CHECK(rel_l2(ht.ptr() + n * block, d.h0.ptr() + n * block, std::size_t(block)) == 0.0);
}

TEST_CASE("chunk size does not change the result", "[chunked]") {
  GdnProblem p = make_problem(1, 150, 1, 2, 16, 16, 16, true);
  const GdnInputs<double> d = random_gdn_inputs<double>(p, 3, true);
  Tensor<double> o16(output_shape(p)), o(output_shape(p));
  chunk_forward(p, d.view(), o16.ptr(), nullptr);
  for (int C : {32, 64, 128}) {
    p.chunk_size = C;
    chunk_forward(p, d.view(), o.ptr(), nullptr);
    INFO("C=" << C);
    CHECK(rel_l2(o, o16) <= 1e-12);
  }
}

TEST_CASE("bad problems are refused with a message naming the value", "[chunked]") {
  GdnProblem p = make_problem(1, 10, 2, 3, 4, 4, 64);
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("Hv=3 is not a multiple of key heads Hk=2"));
  p = make_problem(1, 10, 1, 1, 4, 4, 48);
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("chunk_size=48"));
  p = make_problem(1, 10, 1, 1, 4, 4, 256);
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("power of two in [16, 128]"));
  p = make_problem(1, 10, 1, 1, 4, 4, 64, false, {0, 6, 4, 10});
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("cu_seqlens decreases: cu[1]=6, cu[2]=4"));
  p = make_problem(1, 10, 1, 1, 4, 4, 64, false, {0, 6, 6, 10});
  CHECK_NOTHROW(p.validate());  // a zero-length sequence
  p = make_problem(1, 10, 1, 1, 4, 4, 64, false, {0});
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("cu_seqlens has 1 entries"));
  p = make_problem(1, 10, 1, 1, 4, 4, 64, false, {0, 4, 9});
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("expected the sequence length T=10"));
  p = make_problem(2, 10, 1, 1, 4, 4, 64, false, {0, 4, 10});
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("needs batch size B=1"));
}
