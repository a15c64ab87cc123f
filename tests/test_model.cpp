// The GDN layer and the whole model against central finite differences in fp64, on one
// rank (the cross-rank invariance is test_model_mpi).
#include <catch2/catch.hpp>

#include "comm/single_communicator.h"
#include "model/gdn_layer.h"
#include "model/model.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

ModelConfig tiny_model() {
  return make_model_config(23, 12, 2, 10, 1, 2, 4, 3, 0.3);
}

}  // namespace

TEST_CASE("GDN layer backward matches finite differences (fp64, input and every parameter)",
          "[model][fd]") {
  SingleCommunicator comm;
  const ModelConfig c = tiny_model();
  ParamStore<double> ps;
  GdnLayer<double> layer(ps, "layer.", c, 16);
  Rng rng(3);
  layer.init(rng, 0.3);
  const int B = 2, T = 19, d = c.hidden_size;
  Tensor<double> x = random_tensor<double>({B, T, d}, 4);
  const Tensor<double> r = random_tensor<double>({B, T, d}, 5);
  std::vector<double> y(B * T * d);
  auto loss = [&] {
    layer.forward(comm, B, T, T, x.ptr(), y.data());
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r.data[i];
    return s;
  };
  loss();
  ps.zero_grad();
  std::vector<double> dx(x.data.size());
  layer.backward(comm, r.ptr(), dx.data());
  CHECK(rel_l2(dx.data(), finite_differences(x.data, loss).data(), dx.size()) < 1e-7);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    Param<double>& p = ps[i];
    const std::vector<double> fd = finite_differences(p.value.data, loss);
    INFO(p.name);
    // 1e-6: dt_bias moves g of every token at once, so the O(eps^2) term of the central
    // difference is larger there (2.5e-7 measured); a wrong gradient is off by O(1).
    CHECK(rel_l2(p.grad.ptr(), fd.data(), fd.size()) < 1e-6);
  }
}

TEST_CASE("whole-model gradients match finite differences (fp64, every parameter tensor)",
          "[model][fd]") {
  SingleCommunicator comm;
  for (bool tied : {false, true}) {
    ModelConfig c = tiny_model();
    c.tie_word_embeddings = tied;
    GdnModel<double> model(c, 16);
    model.init(7);
    const int B = 2, T = 9;
    std::vector<std::int32_t> tokens(B * T), targets(B * T);
    Rng rng(8);
    for (auto& t : tokens) t = std::int32_t(rng.next_u64() % c.vocab_size);
    for (auto& t : targets) t = std::int32_t(rng.next_u64() % c.vocab_size);
    const double scale = 1.0 / (B * T);
    ParamStore<double>& ps = model.params();
    auto loss = [&] {
      const double s = model.forward_backward(comm, tokens.data(), targets.data(), B, T, T, scale);
      return s * scale;
    };
    ps.zero_grad();
    loss();
    std::vector<std::vector<double>> grads;
    for (std::size_t i = 0; i < ps.size(); ++i) grads.push_back(ps[i].grad.data);
    // Every parameter tensor; a few entries each keeps the run short.
    for (std::size_t i = 0; i < ps.size(); ++i) {
      Param<double>& p = ps[i];
      const std::size_t n = p.value.data.size(), stride = std::max<std::size_t>(1, n / 5);
      std::vector<double> fd, an;
      for (std::size_t e = 0; e < n; e += stride) {
        const double x0 = p.value.data[e], eps = 1e-6;
        p.value.data[e] = x0 + eps;
        const double lp = loss();
        p.value.data[e] = x0 - eps;
        const double lm = loss();
        p.value.data[e] = x0;
        fd.push_back((lp - lm) / (2 * eps));
        an.push_back(grads[i][e]);
      }
      INFO((tied ? "tied " : "untied ") << p.name);
      CHECK(rel_l2(an.data(), fd.data(), fd.size()) < 1e-6);
    }
  }
}
