// The gated attention layer and the sparse MoE block against central finite differences
// in fp64, every input and every parameter, on one rank (the cross-rank invariance of the
// whole hybrid model is test_model_mpi); and the router's statistics against a direct count.
#include <algorithm>
#include <catch2/catch.hpp>

#include "comm/single_communicator.h"
#include "model/attention_mixer.h"
#include "model/moe_mlp.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

// Sets every parameter of ps to N(0, scale) (the norms too, so their gradients matter).
void randomise(ParamStore<double, Host>& ps, std::uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<double> v(std::size_t(ps.num_elements()));
  for (double& x : v) x = scale * rng.normal();
  ps.set_values(v);
}

// A layer L (AttentionMixer, MoeMlp) of config c in a parameter store of its own, every
// parameter set by randomise(seed, scale).
template <class L>
struct RandomLayer {
  ParamStore<double, Host> ps;
  L layer;
  RandomLayer(const ModelConfig& c, std::uint64_t seed, double scale) : layer(ps, "layer.", c) {
    ps.allocate();
    randomise(ps, seed, scale);
  }
};

// The gradient of `loss` by finite differences for x and every parameter, against the
// analytic ones.
template <typename F>
void check_against_fd(ParamStore<double, Host>& ps, std::vector<double>& x,
                      const std::vector<double>& dx, F loss, double tol) {
  CHECK(rel_l2(dx.data(), finite_differences(x, loss).data(), dx.size()) < tol);
  const std::vector<double> grads = ps.host_grads();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const ParamInfo& p = ps.info(i);
    const std::vector<double> fd = finite_differences(ps.value(i), std::size_t(p.size), loss);
    INFO(p.name);
    CHECK(rel_l2(grads.data() + p.offset, fd.data(), fd.size()) < tol);
  }
}

}  // namespace

TEST_CASE("gated attention backward matches finite differences (fp64)", "[attention][fd]") {
  for (bool bias : {false, true}) {
    INFO("attention_bias " << bias);
    SingleCommunicator comm;
    const ModelConfig c = attention_layer_config(bias);
    RandomLayer<AttentionMixer<double, Host>> random(c, 3, 0.4);
    auto& [ps, layer] = random;
    const int B = 2, T = 9, d = c.hidden_size;
    const CpContext cp = CpContext::contiguous(comm, T);
    std::vector<double> x = random_tensor<double>({B, T, d}, 4).data;
    const std::vector<double> r = random_tensor<double>({B, T, d}, 5).data;
    std::vector<double> y(x.size());
    auto loss = [&] {
      layer.forward(cp, B, x.data(), y.data());
      double s = 0;
      for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
      return s;
    };
    loss();
    ps.zero_grad();
    std::vector<double> dx(x.size());
    layer.backward(cp, r.data(), dx.data());
    check_against_fd(ps, x, dx, loss, 1e-7);
  }
}

TEST_CASE("attention's output at a position does not depend on later tokens", "[attention]") {
  SingleCommunicator comm;
  const ModelConfig c = attention_layer_config(false);
  RandomLayer<AttentionMixer<double, Host>> random(c, 7, 0.4);
  auto& layer = random.layer;
  const int T = 8, d = c.hidden_size;
  const CpContext cp = CpContext::contiguous(comm, T);
  std::vector<double> x = random_tensor<double>({1, T, d}, 8).data, y0(x.size()), y1(x.size());
  layer.forward(cp, 1, x.data(), y0.data());
  for (int i = 5 * d; i < T * d; ++i) x[std::size_t(i)] += 1.0;  // change tokens 5..7
  layer.forward(cp, 1, x.data(), y1.data());
  CHECK(std::equal(y0.begin(), y0.begin() + 5 * d, y1.begin()));
  CHECK_FALSE(std::equal(y0.begin() + 5 * d, y0.end(), y1.begin() + 5 * d));
}

TEST_CASE("MoE block backward matches finite differences, router and load-balancing loss included",
          "[moe][fd]") {
  for (auto [family, norm] :
       {std::pair{ModelFamily::qwen3_next, true}, std::pair{ModelFamily::qwen3_next, false},
        std::pair{ModelFamily::qwen3_5_moe, false}}) {
    INFO(name_of(family) << " norm_topk_prob " << norm);
    const ModelConfig c = moe_layer_config(family, norm);
    RandomLayer<MoeMlp<double, Host>> random(c, 11, 0.5);
    auto& [ps, moe] = random;
    const int N = 13, d = c.hidden_size, E = c.num_experts;
    std::vector<double> x = random_tensor<double>({N, d}, 12).data;
    const std::vector<double> r = random_tensor<double>({N, d}, 13).data;
    // The model hands the block d(aux)/d p[e]; the matching objective term is
    // sum_e w[e] * (sum of p[., e] over the tokens), which add_router_stats reports.
    const std::vector<double> w = random_tensor<double>({E}, 14).data;
    std::vector<double> y(x.size());
    auto loss = [&] {
      moe.forward(N, x.data(), y.data());
      double s = 0;
      for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
      std::vector<double> assigned(static_cast<std::size_t>(E)), prob(static_cast<std::size_t>(E));
      moe.add_router_stats(assigned.data(), prob.data());
      for (int e = 0; e < E; ++e) s += w[std::size_t(e)] * prob[std::size_t(e)];
      return s;
    };
    loss();
    ps.zero_grad();
    moe.set_router_loss_grad(w.data());
    std::vector<double> dx(x.size());
    moe.backward(r.data(), dx.data());
    check_against_fd(ps, x, dx, loss, 1e-7);
  }
}

TEST_CASE("the router's statistics count the top-k choices and sum the probabilities", "[moe]") {
  const ModelConfig c = moe_layer_config(ModelFamily::qwen3_next, true);
  RandomLayer<MoeMlp<double, Host>> random(c, 21, 0.8);
  auto& [ps, moe] = random;
  const int N = 40, d = c.hidden_size, E = c.num_experts, k = c.num_experts_per_tok;
  const std::vector<double> x = random_tensor<double>({N, d}, 22).data;
  std::vector<double> y(x.size());
  moe.forward(N, x.data(), y.data());
  std::vector<double> assigned(static_cast<std::size_t>(E)), prob(static_cast<std::size_t>(E));
  moe.add_router_stats(assigned.data(), prob.data());
  // Directly: softmax of x gate^T per token, its k largest.
  const double* Wr = ps.value(ps.find("layer.mlp.gate.weight"));
  std::vector<double> want_assigned(static_cast<std::size_t>(E)),
      want_prob(static_cast<std::size_t>(E));
  for (int n = 0; n < N; ++n) {
    std::vector<double> l(static_cast<std::size_t>(E));
    double mx = -1e300, sum = 0;
    for (int e = 0; e < E; ++e) {
      for (int i = 0; i < d; ++i) l[std::size_t(e)] += x[std::size_t(n * d + i)] * Wr[e * d + i];
      mx = std::max(mx, l[std::size_t(e)]);
    }
    for (double& v : l) sum += (v = std::exp(v - mx));
    std::vector<int> order(static_cast<std::size_t>(E));
    for (int e = 0; e < E; ++e) {
      want_prob[std::size_t(e)] += l[std::size_t(e)] / sum;
      order[std::size_t(e)] = e;
    }
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return l[std::size_t(a)] > l[std::size_t(b)]; });
    for (int j = 0; j < k; ++j) want_assigned[std::size_t(order[std::size_t(j)])] += 1;
  }
  CHECK(assigned == want_assigned);
  CHECK(rel_l2(prob.data(), want_prob.data(), prob.size()) < 1e-14);
  double total = 0;
  for (double a : assigned) total += a;
  CHECK(total == N * k);
}
