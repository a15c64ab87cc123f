// The GDN layer and the whole model against central finite differences in fp64, on one
// rank (the cross-rank invariance is test_model_mpi).
#include <algorithm>
#include <catch2/catch.hpp>

#include "comm/single_communicator.h"
#include "model/gdn_mixer.h"
#include "model/model.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

ModelConfig tiny_model() {
  return make_model_config(23, 12, 2, 10, 1, 2, 4, 3, 0.3);
}

// A whole model of config c (chunk 16), its weights drawn from seed 7, on one rank.
std::unique_ptr<Model<double, Host>> one_rank_model(const ModelConfig& c, Communicator& comm,
                                                    const ModelOptions& o = {}) {
  auto model = std::make_unique<Model<double, Host>>(c, 16, o);
  model->init(7);
  model->set_comms(ModelComms::single(comm));
  return model;
}

// A GDN layer of tiny_model() under `prefix`, its parameters drawn from seed 3.
struct GdnLayer {
  ParamStore<double, Host> ps;
  GdnMixer<double, Host> layer;
  explicit GdnLayer(const std::string& prefix) : layer(ps, prefix, tiny_model(), 16) {
    ps.allocate();
    Rng rng(3);
    std::vector<double> init(ps.num_elements());
    layer.init(rng, 0.3, HostParams<double>{init.data(), 0, ps.num_elements()});
    ps.set_values(init);
  }
};

}  // namespace

TEST_CASE("GDN layer backward matches finite differences (fp64, input and every parameter)",
          "[model][fd]") {
  SingleCommunicator comm;
  const ModelConfig c = tiny_model();
  GdnLayer g("layer.");
  ParamStore<double, Host>& ps = g.ps;
  GdnMixer<double, Host>& layer = g.layer;
  const int B = 2, T = 19, d = c.hidden_size;
  const CpContext cp = CpContext::contiguous(comm, T);
  Tensor<double> x = random_tensor<double>({B, T, d}, 4);
  const Tensor<double> r = random_tensor<double>({B, T, d}, 5);
  std::vector<double> y(B * T * d);
  auto loss = [&] {
    layer.forward(cp, B, x.ptr(), y.data());
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r.data[i];
    return s;
  };
  loss();
  ps.zero_grad();
  std::vector<double> dx(x.data.size());
  layer.backward(cp, r.ptr(), dx.data());
  CHECK(rel_l2(dx.data(), finite_differences(x.data, loss).data(), dx.size()) < 1e-7);
  const std::vector<double> grads = ps.host_grads();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const ParamInfo& p = ps.info(i);
    const std::vector<double> fd = finite_differences(ps.value(i), std::size_t(p.size), loss);
    INFO(p.name);
    // 1e-6: dt_bias moves g of every token at once, so the O(eps^2) term of the central
    // difference is larger there (2.5e-7 measured); a wrong gradient is off by O(1).
    CHECK(rel_l2(grads.data() + p.offset, fd.data(), fd.size()) < 1e-6);
  }
}

TEST_CASE("whole-model gradients match finite differences (fp64, every parameter tensor)",
          "[model][fd]") {
  SingleCommunicator comm;
  for (bool tied : {false, true}) {
    ModelConfig c = tiny_model();
    c.tie_word_embeddings = tied;
    const auto model = one_rank_model(c, comm);
    const int B = 2, T = 9;
    const StepShard cp = StepShard::contiguous(T);
    std::vector<std::int32_t> tokens(B * T), targets(B * T);
    Rng rng(8);
    for (auto& t : tokens) t = std::int32_t(rng.next_u64() % c.vocab_size);
    for (auto& t : targets) t = std::int32_t(rng.next_u64() % c.vocab_size);
    const double scale = 1.0 / (B * T);
    ParamStore<double, Host>& ps = model->params();
    auto loss = [&] {
      const double s = model->forward_backward(cp, tokens.data(), targets.data(), B, scale).ce_sum;
      return s * scale;
    };
    ps.zero_grad();
    loss();
    const std::vector<double> grads = ps.host_grads();
    // Every parameter tensor; a few entries each keeps the run short.
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const ParamInfo& p = ps.info(i);
      double* w = ps.value(i);
      const std::size_t n = std::size_t(p.size), stride = std::max<std::size_t>(1, n / 5);
      std::vector<double> fd, an;
      for (std::size_t e = 0; e < n; e += stride) {
        const double x0 = w[e], eps = 1e-6;
        w[e] = x0 + eps;
        const double lp = loss();
        w[e] = x0 - eps;
        const double lm = loss();
        w[e] = x0;
        fd.push_back((lp - lm) / (2 * eps));
        an.push_back(grads[std::size_t(p.offset) + e]);
      }
      INFO((tied ? "tied " : "untied ") << p.name);
      // 5e-6: the loss's rounding (~1e-16 of it) over 2 eps dominates for the small
      // gradients of the norm weights (1.0e-6 measured); a wrong gradient is off by O(1).
      CHECK(rel_l2(an.data(), fd.data(), fd.size()) < 5e-6);
    }
  }
}

TEST_CASE("pad_token_id: its embedding row starts at zero and gets no embedding gradient",
          "[model]") {
  SingleCommunicator comm;
  for (bool tied : {false, true}) {
    ModelConfig c = tiny_model();
    c.tie_word_embeddings = tied;
    c.pad_token_id = 3;
    const auto model = one_rank_model(c, comm);
    ParamStore<double, Host>& ps = model->params();
    const ParamId embed = ps.find("model.embed_tokens.weight");
    const int d = c.hidden_size;
    const double* row = ps.value(embed) + 3 * d;
    CHECK(std::all_of(row, row + d, [](double x) { return x == 0.0; }));
    const int B = 1, T = 8;
    const StepShard cp = StepShard::contiguous(T);
    std::vector<std::int32_t> tokens{3, 1, 3, 2, 5, 3, 0, 4}, targets{1, 3, 2, 5, 3, 0, 4, 3};
    ps.zero_grad();
    model->forward_backward(cp, tokens.data(), targets.data(), B, 1.0 / T);
    const std::vector<double> g = ps.host_grads();
    const double* grow = g.data() + ps.info(embed).offset + 3 * d;
    double norm = 0;
    for (int i = 0; i < d; ++i) norm += grow[i] * grow[i];
    INFO((tied ? "tied" : "untied"));
    // Untied: the pad row's only gradient would be the embedding's, which it does not get.
    // Tied: the LM head's part remains (transformers' padding_idx masks the embedding only).
    if (tied)
      CHECK(norm > 0);
    else
      CHECK(norm == 0);
    // Another row used as input gets its gradient.
    const double* g1 = g.data() + ps.info(embed).offset + 1 * d;
    CHECK(std::any_of(g1, g1 + d, [](double x) { return x != 0.0; }));
  }
}

TEST_CASE("a mixer refuses a backward after its activations were released, naming the layer",
          "[model][recompute]") {
  SingleCommunicator comm;
  GdnLayer g("model.layers.4.");
  GdnMixer<double, Host>& layer = g.layer;
  const int B = 1, T = 7, d = tiny_model().hidden_size;
  const CpContext cp = CpContext::contiguous(comm, T);
  const Tensor<double> x = random_tensor<double>({B, T, d}, 4);
  std::vector<double> y(B * T * d), dx(B * T * d);
  layer.forward(cp, B, x.ptr(), y.data());
  layer.release(Keep::nothing);
  CHECK_THROWS_WITH(layer.backward(cp, y.data(), dx.data()),
                    Catch::StartsWith("model.layers.4.linear_attn: backward called when nothing "
                                      "is kept"));
  layer.forward(cp, B, x.ptr(), y.data());
  layer.release(Keep::replay);
  CHECK_THROWS_WITH(layer.backward(cp, y.data(), dx.data()),
                    Catch::Contains("run the recomputing forward first"));
  layer.forward(cp, B, x.ptr(), y.data());  // the recomputation
  CHECK_NOTHROW(layer.backward(cp, y.data(), dx.data()));
}

TEST_CASE("the LM head in blocks: the one-block loss and gradients; a bad target after the step",
          "[model]") {
  // 18 tokens in blocks of 4 (the last of 2) against one block: the loss sums and dW's
  // accumulations change order only. A bad target in the third block is reported once the
  // step is done, with its row of the shard (not of its block).
  SingleCommunicator comm;
  const ModelConfig c = tiny_model();
  const int B = 2, T = 9;
  const StepShard cp = StepShard::contiguous(T);
  std::vector<std::int32_t> tokens(B * T), targets(B * T);
  Rng rng(12);
  for (auto& t : tokens) t = std::int32_t(rng.next_u64() % c.vocab_size);
  for (auto& t : targets) t = std::int32_t(rng.next_u64() % c.vocab_size);
  auto run = [&](std::int64_t block, std::vector<double>& grads) {
    ModelOptions o;
    o.loss_block_tokens = block;
    const auto model = one_rank_model(c, comm, o);
    model->params().zero_grad();
    const double loss =
        model->forward_backward(cp, tokens.data(), targets.data(), B, 1.0 / (B * T)).ce_sum;
    grads = model->params().host_grads();
    return loss;
  };
  std::vector<double> g1, g4;
  const double one = run(0, g1), blocks = run(4, g4);
  CHECK(blocks == Approx(one).epsilon(1e-14));
  CHECK(rel_l2(g4.data(), g1.data(), g1.size()) < 1e-14);

  targets[9] = c.vocab_size;  // row 9: block 3 (rows 8-11), its row 1
  targets[15] = -7;
  CHECK_THROWS_WITH(run(4, g4),
                    Catch::Contains("target " + std::to_string(c.vocab_size) + " at row 9 "));
}
