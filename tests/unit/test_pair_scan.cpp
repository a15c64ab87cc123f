// The pair algebra of CP, without communication: a slice's (M, U) reproduces its exit
// state for any entry state, and the linear scans agree with running the slices in order.
#include <catch2/catch.hpp>

#include "cp/shard.h"
#include "gdn/pass/local_pass.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

TEST_CASE("a slice is an affine map of its entry state", "[pairs]") {
  const GdnProblem p = make_problem(2, 90, 1, 2, 8, 6, 16);
  const GdnInputs<double> d = random_gdn_inputs<double>(p, 5, false);
  const int BH = p.B * p.Hv, K = p.K, V = p.V;
  // The interior slice [30, 90): copy its tokens out of the [B, T, ...] tensors.
  const std::int64_t t0 = 30, n = p.T - t0;
  auto slice_of = [&](const Tensor<double>& x, std::int64_t width) {
    Tensor<double> out({p.B, n, width});
    for (int b = 0; b < p.B; ++b)
      std::copy_n(x.ptr() + (b * p.T + t0) * width, n * width, out.ptr() + b * n * width);
    return out;
  };
  const Tensor<double> q = slice_of(d.q, K), k = slice_of(d.k, K), v = slice_of(d.v, 2 * V),
                       g = slice_of(d.g, 2), beta = slice_of(d.beta, 2);
  LocalPass<double, Host> slice(p, t0, p.T,
                                {q.ptr(), k.ptr(), v.ptr(), g.ptr(), beta.ptr(), nullptr});
  slice.prepare();
  std::vector<double> M(BH * K * K), U(BH * K * V);
  slice.transition(M.data(), U.data());
  // For a random entry state h, the slice's exit state must be M h + U.
  const Tensor<double> h = random_tensor<double>({BH, K, V}, 6);
  std::vector<double> o(p.B * n * p.Hv * V);
  Tensor<double> ht({p.B, p.Hv, K, V});
  slice.output(h.ptr(), o.data(), ht.ptr());
  std::vector<double> want(U);
  for (int bh = 0; bh < BH; ++bh)
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < V; ++j)
        for (int l = 0; l < K; ++l)
          want[(bh * K + i) * V + j] += M[(bh * K + i) * K + l] * h.data[(bh * K + l) * V + j];
  CHECK(rel_l2(ht.ptr(), want.data(), want.size()) < 1e-12);
  // M is a genuine K x K matrix, not a scalar times the identity (the delta rule's M).
  // (The decay makes M small; compare an off-diagonal entry with the diagonal.)
  CHECK(std::abs(M[1]) > 1e-3 * std::abs(M[0]));
}

TEST_CASE("contiguous shards: ceil split, last ranks may be empty", "[shard]") {
  CHECK(contiguous_shard(10, 4, 0).begin == 0);
  CHECK(contiguous_shard(10, 4, 0).end == 3);
  CHECK(contiguous_shard(10, 4, 3).begin == 9);
  CHECK(contiguous_shard(10, 4, 3).end == 10);
  CHECK(contiguous_shard(5, 4, 3).size() == 0);
  CHECK(contiguous_shard(5, 4, 2).size() == 1);
  std::int64_t covered = 0;
  for (int r = 0; r < 7; ++r) covered += contiguous_shard(100, 7, r).size();
  CHECK(covered == 100);
}

TEST_CASE("zigzag is refused with the reason", "[shard]") {
  CHECK_NOTHROW(require_contiguous_shards(LoadBalance::none, "test"));
  CHECK_THROWS_WITH(require_contiguous_shards(parse_load_balance("zigzag"), "test"),
                    Catch::Contains("requires contiguous, in-order shards") &&
                        Catch::Contains("sequential recurrence"));
  CHECK_THROWS_WITH(parse_load_balance("spiral"), Catch::Contains("'spiral'"));
}
