// Tests src/ops/embedding and src/ops/cross_entropy (the token-id ops at the model's two
// ends) on the host: by hand, against finite differences, and bad token ids.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/embedding/embedding.h"
#include "ops_support.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

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
// Cross-entropy

TEST_CASE("cross-entropy leaves out ignored targets", "[layers]") {
  // The rows of kIgnoreTarget add nothing and get zero gradients; the others are as if
  // they were alone.
  const int V = 6;
  const Vec logits = rand_vec(4 * V, 40, 2.0);
  const std::vector<std::int32_t> tgt = {3, ops::kIgnoreTarget, 0, ops::kIgnoreTarget};
  Vec dl(4 * V, 7.0);
  const double got = ops::cross_entropy(Host{}, logits.data(), tgt.data(), 4, V, 0.5, dl.data());
  double want = 0;
  for (int i : {0, 2}) {
    Vec d1(V);
    want += ops::cross_entropy(Host{}, logits.data() + i * V, &tgt[std::size_t(i)], 1, V, 0.5,
                               d1.data());
    for (int j = 0; j < V; ++j) CHECK(dl[std::size_t(i * V + j)] == d1[std::size_t(j)]);
  }
  CHECK(got == want);
  for (int i : {1, 3})
    for (int j = 0; j < V; ++j) CHECK(dl[std::size_t(i * V + j)] == 0.0);
  const std::vector<std::int32_t> bad = {3, -1, 0, 1};
  CHECK_THROWS_WITH(ops::cross_entropy(Host{}, logits.data(), bad.data(), 4, V, 0.5, dl.data()),
                    Catch::Contains("target -1 at row 1"));
}

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

TEST_CASE("cross-entropy float instantiation agrees with double", "[layers]") {
  // The float entry point against the fp64 result.
  const std::int64_t N = 9;
  const int d = 20;
  const Vec x = rand_vec(N * d, 32);
  const auto xf = to<float>(x);
  const std::vector<std::int32_t> tgt = {0, 19, 3, 3, 7, 1, 2, 5, 11};
  Vec dl(N * d);
  std::vector<float> dlf(N * d);
  const double ce = ops::cross_entropy(Host{}, x.data(), tgt.data(), N, d, 0.5, dl.data());
  const double cef = ops::cross_entropy(Host{}, xf.data(), tgt.data(), N, d, 0.5, dlf.data());
  CHECK(cef == Approx(ce).epsilon(1e-6));
  CHECK(rel_l2(dlf.data(), dl.data(), dl.size()) < 1e-6);
}

TEMPLATE_TEST_CASE("cross_entropy_add over blocks: the calls' losses in order, bad targets kept",
                   "[layers]", float, double) {
  // The LM head's token blocks: rows [0, 3), [3, 5), [5, 9) added into one total.
  using T = TestType;
  const int V = 6;
  const std::int64_t N = 9;
  const std::vector<T> logits = to<T>(rand_vec(N * V, 50, 2.0));
  std::vector<std::int32_t> tgt = {5, 0, ops::kIgnoreTarget, 3, 1, 2, 4, 0, 5};
  const std::vector<std::int64_t> cut = {0, 3, 5, 9};
  auto run = [&](std::vector<T>& dl) {
    ops::CrossEntropyTotal total;
    for (std::size_t b = 0; b + 1 < cut.size(); ++b)
      ops::cross_entropy_add(Host{}, logits.data() + cut[b] * V, tgt.data() + cut[b],
                             cut[b + 1] - cut[b], V, 0.5, dl.data() + cut[b] * V, cut[b], &total);
    return total;
  };
  std::vector<T> dl(N * V), want_dl(N * V);
  const ops::CrossEntropyTotal total = run(dl);
  double want = 0;  // what the model summed before: one cross_entropy per block
  for (std::size_t b = 0; b + 1 < cut.size(); ++b)
    want += ops::cross_entropy(Host{}, logits.data() + cut[b] * V, tgt.data() + cut[b],
                               cut[b + 1] - cut[b], V, 0.5, want_dl.data() + cut[b] * V);
  CHECK(total.bad == 0);
  CHECK(total.loss == want);
  CHECK(dl == want_dl);
  CHECK_NOTHROW(ops::check_targets(total, V));

  // Invalid targets in the third block (rows 6 and 8) do not throw there: the total keeps
  // the first with its row of the whole run, and check_targets names them.
  tgt[6] = V;
  tgt[8] = -1;
  const ops::CrossEntropyTotal bad = run(dl);
  CHECK(bad.bad == 1);
  CHECK(bad.bad_row == 6);
  CHECK(bad.bad_target == V);
  CHECK_THROWS_WITH(ops::check_targets(bad, V),
                    Catch::Contains("target 6 at row 6") && Catch::Contains("[0, 6)"));
  for (int j = 0; j < V; ++j) CHECK(dl[std::size_t(6 * V + j)] == T(0));  // as if ignored
  // An earlier one in the second block is the first.
  tgt[4] = 99;
  CHECK(run(dl).bad_row == 4);
  CHECK_THROWS_WITH(ops::check_targets(run(dl), V), Catch::Contains("target 99 at row 4"));
}
