#include "model/model.h"

#include <algorithm>
#include <string>
#include <vector>

#include "comm/call_sites.h"
#include "core/profile.h"
#include "core/rng.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embedding/embedding.h"
#include "ops/linear/linear.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "runtime/devices.h"

namespace gdn {

namespace {

// Adds the model's parameters in their fixed order (the one checkpoints and the
// initialisation follow), making each layer's mixer and MLP; ids of the named ones out.
template <typename T, typename Dev, typename Block>
void add_parameters(const ModelConfig& c, int chunk_size, ExpertSplit split, Precision precision,
                    ParamStore<T, Dev>& ps, std::vector<Block>& blocks, ParamId& embed,
                    ParamId& final_norm, ParamId& lm_head) {
  const int d = c.hidden_size, Vocab = c.vocab_size;
  ps.begin_unit("model.embed_tokens");
  embed = ps.add("model.embed_tokens.weight", {Vocab, d}, true);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    ps.begin_unit("model.layers." + std::to_string(l));
    Block b;
    b.unit_begin = ps.units().size() - 1;
    b.input_norm = ps.add(p + "input_layernorm.weight", {d}, false);
    b.mixer = make_mixer(c.layer_type(l), ps, p, c, chunk_size, precision);
    b.post_norm = ps.add(p + "post_attention_layernorm.weight", {d}, false);
    b.mlp = make_mlp(ps, p, c, l, split, precision);
    b.unit_end = ps.units().size();
    b.moe = c.is_moe_layer(l);
    blocks.push_back(std::move(b));
  }
  ps.begin_unit(c.tie_word_embeddings ? "model.norm" : "model.norm + lm_head");
  final_norm = ps.add("model.norm.weight", {d}, false);
  lm_head = c.tie_word_embeddings ? embed : ps.add("lm_head.weight", {Vocab, d}, true);
}

struct CountBlock {
  std::size_t unit_begin = 0, unit_end = 0;
  ParamId input_norm, post_norm;
  std::unique_ptr<Mixer<float, Host>> mixer;
  std::unique_ptr<Mlp<float, Host>> mlp;
  bool moe = false;
};

}  // namespace

namespace {

ParamStore<float, Host> count_parameters(const ModelConfig& c, ExpertSplit split) {
  // The layers register their parameters when made; nothing is allocated.
  ParamStore<float, Host> ps;
  std::vector<CountBlock> blocks;
  ParamId embed, norm, head;
  add_parameters(c, kDefaultChunkSize, split, Precision::plain, ps, blocks, embed, norm, head);
  return ps;
}

}  // namespace

std::vector<ParamUnit> parameter_units(const ModelConfig& c, ExpertSplit split) {
  return count_parameters(c, split).units();
}

std::vector<ParamInfo> parameter_infos(const ModelConfig& c, ExpertSplit split) {
  return count_parameters(c, split).infos();
}

std::int64_t parameter_count(const ModelConfig& c) {
  return parameter_units(c).back().end;
}

template <typename T, typename Dev>
Model<T, Dev>::Model(const ModelConfig& c, int chunk_size, ModelOptions options)
    : c_(c), options_(options), precision_(precision_of(options.bf16)) {
  add_parameters(c, chunk_size, options.experts, precision_, params_, blocks_, embed_, final_norm_,
                 lm_head_);
  if (options.experts.ep > 1) {
    // Each parameter's place in the whole model: the same one, but for a block of
    // experts, the rows of the experts before it.
    const std::vector<ParamInfo> whole = parameter_infos(c);
    const std::vector<ParamUnit>& units = params_.units();
    for (ParamId i = 0; i < params_.size(); ++i) {
      const ParamInfo& p = params_.info(i);
      GDN_CHECK(whole[i].name == p.name, "parameter ", i, " is '", p.name, "' here and '",
                whole[i].name, "' in the whole model");
      const std::int64_t rows = units[p.unit].expert ? p.shape[0] : 0;
      params_.set_global(
          i, whole[i].offset + (rows > 0 ? std::int64_t(options.experts.rank) * p.size : 0));
    }
  }
  if (options.by_unit)
    params_.allocate_by_unit();
  else
    params_.allocate();
}

template <typename T, typename Dev>
void Model<T, Dev>::init(std::uint64_t seed) {
  // On the host the parameters are drawn in place: a second full copy would be the run's
  // peak memory for a large model (parameters, gradients and moments exist already). On a
  // GPU they are drawn on the host, one unit at a time, and uploaded.
  Rng rng(seed);
  if constexpr (std::is_same_v<Buffer<Dev, T>, std::vector<T>>) {
    if (options_.experts.ep > 1) {
      draw_init_by_unit(seed, [&](std::size_t u, const T* host) {
        std::copy_n(host, params_.units()[u].size(), params_.unit_values(u));
      });
      return;
    }
    std::vector<T>& values = params_.host_storage();
    std::fill(values.begin(), values.end(), T(0));
    for (std::size_t g = 0; g < blocks_.size() + 2; ++g)
      draw_group(g, rng, HostParams<T>{values.data(), 0, params_.num_elements()});
  } else {
    draw_init_by_unit(seed, [&](std::size_t u, const T* host) {
      Dev::upload(params_.unit_values(u), host, std::size_t(params_.units()[u].size()));
    });
  }
}

template <typename T, typename Dev>
void Model<T, Dev>::draw_init_by_unit(
    std::uint64_t seed, const std::function<void(std::size_t, const T*)>& take) const {
  if (options_.experts.ep > 1) {
    // The draws run over every expert: the whole model (stored by unit, so nothing is
    // allocated) draws each unit, and this rank keeps its parameters' parts of it.
    ModelOptions whole_options;
    whole_options.by_unit = true;
    const Model<T, Host> whole(c_, kDefaultChunkSize, whole_options);
    std::vector<T> mine;
    whole.draw_init_by_unit(seed, [&](std::size_t u, const T* host) {
      const ParamUnit& pu = params_.units()[u];
      const std::int64_t global_begin = whole.params().units()[u].begin;
      mine.assign(std::size_t(pu.size()), T(0));
      for (const ParamInfo& p : params_.infos())
        if (p.unit == u)
          std::copy_n(host + (p.global - global_begin), p.size,
                      mine.begin() + (p.offset - pu.begin));
      take(u, mine.data());
    });
    return;
  }
  Rng rng(seed);
  std::vector<T> host;
  const std::vector<ParamUnit>& units = params_.units();
  for (std::size_t g = 0; g < blocks_.size() + 2; ++g) {
    const auto [first, last] = group_units(g);
    const std::int64_t begin = units[first].begin, end = units[last - 1].end;
    host.assign(std::size_t(end - begin), T(0));
    draw_group(g, rng, HostParams<T>{host.data(), begin, end - begin});
    for (std::size_t u = first; u < last; ++u) take(u, host.data() + (units[u].begin - begin));
  }
}

template <typename T, typename Dev>
std::pair<std::size_t, std::size_t> Model<T, Dev>::group_units(std::size_t g) const {
  if (g == 0) return {0, 1};
  if (g <= blocks_.size()) return {blocks_[g - 1].unit_begin, blocks_[g - 1].unit_end};
  return {head_unit(), head_unit() + 1};
}

template <typename T, typename Dev>
void Model<T, Dev>::draw_group(std::size_t u, Rng& rng, const HostParams<T>& host) const {
  const double std = c_.initializer_range;
  // RMSNorm weights stay zero: Qwen3-Next scales by (1 + w).
  auto normal = [&](ParamId id) {
    T* w = host.at(params_.info(id));
    for (std::int64_t i = 0; i < params_.info(id).size; ++i) w[i] = T(std * rng.normal());
  };
  if (u == 0) {
    normal(embed_);
    // transformers' nn.Embedding(padding_idx = pad_token_id): that row starts at zero.
    if (c_.pad_token_id >= 0)
      std::fill_n(host.at(params_.info(embed_)) + std::int64_t(c_.pad_token_id) * c_.hidden_size,
                  c_.hidden_size, T(0));
  } else if (u <= blocks_.size()) {
    blocks_[u - 1].mixer->init(rng, std, host);
    blocks_[u - 1].mlp->init(rng, std, host);
  } else if (lm_head_ != embed_) {
    normal(lm_head_);
  }
}

template <typename T, typename Dev>
void Model<T, Dev>::set_comms(const ModelComms& comms) {
  GDN_CHECK(comms.cp && comms.batch, "Model::set_comms: the cp and batch communicators are needed");
  GDN_CHECK(options_.experts.ep == 1 || (comms.expert_rows && comms.expert_counts),
            "Model::set_comms: experts over ep = ", options_.experts.ep,
            " ranks need the ep group's communicators");
  comms_ = comms;
  for (Block& b : blocks_) b.mlp->set_expert_comm(comms.expert_rows, comms.expert_counts);
}

template <typename T, typename Dev>
std::int64_t Model<T, Dev>::attention_pairs() const {
  std::int64_t n = 0;
  for (const Block& b : blocks_) n += b.mixer->attention_pairs();
  return n;
}

// transformers' load_balancing_loss_func over every MoE layer and every token of the batch:
// with A[e] the top-k assignments and S[e] the router probabilities summed over layers and
// tokens, and R the number of (layer, token) rows, aux = E sum_e (A[e] / R) (S[e] / R).
// `sums` holds this rank's [A, S, R]; returns aux; when `train`, hands each MoE layer
// d(coef aux)/d p[e] = coef E A[e] / R^2.
template <typename T, typename Dev>
double Model<T, Dev>::router_loss(std::vector<double>& sums, bool train, double scale) {
  const int E = c_.num_experts;
  Buffer<Dev, double> d_sums = to_device<Dev>(sums.data(), sums.size());
  comms_.batch->all_reduce_sum(d_sums.data(), sums.size(), model_sites::kRouterStats);
  Dev::download(sums.data(), d_sums.data(), sums.size());
  const double R = sums[2 * std::size_t(E)];
  double aux = 0;
  for (int e = 0; e < E; ++e) aux += (sums[std::size_t(e)] / R) * (sums[std::size_t(E + e)] / R);
  aux *= E;
  if (train) {
    std::vector<double> dprob(static_cast<std::size_t>(E));
    for (int e = 0; e < E; ++e)
      dprob[std::size_t(e)] = scale * c_.router_aux_loss_coef * E * sums[std::size_t(e)] / (R * R);
    for (Block& b : blocks_)
      if (b.moe) b.mlp->set_router_loss_grad(dprob.data());
  }
  return aux;
}

// x_out = x_mid + mlp(norm(x_mid)), x_mid = x_in + mixer(norm(x_in)).
template <typename T, typename Dev>
void Model<T, Dev>::layer_forward(std::size_t l, const CpContext& cp, int B, const T* x_in,
                                  LayerActs& a, T* x_out) {
  const Dev dev{};
  const int d = c_.hidden_size;
  const std::int64_t N = std::int64_t(B) * cp.tokens(), nd = N * d;
  const double eps = c_.rms_norm_eps;
  Block& b = blocks_[l];
  const profile::Region region("layer");  // the norms and residual adds around the blocks
  T* x_mid = a.x_mid.open(nd, precision_);
  T* h1 = a.h1.open(nd, precision_);
  ops::rmsnorm_forward(dev, x_in, params_.value(b.input_norm), N, d, eps, h1);
  b.mixer->forward(cp, B, h1, x_out);
  ops::add(dev, x_mid, x_in, x_out, nd);
  T* h2 = a.h2.open(nd, precision_);
  ops::rmsnorm_forward(dev, x_mid, params_.value(b.post_norm), N, d, eps, h2);
  b.mlp->forward(N, h2, x_out);
  ops::add(dev, x_out, x_mid, x_out, nd);
  a.x_mid.seal();
  a.h1.seal();
  a.h2.seal();
}

// dx: d(x_out) in, d(x_in) out.
template <typename T, typename Dev>
void Model<T, Dev>::layer_backward(std::size_t l, const CpContext& cp, Kept<T, Dev>& x_in,
                                   LayerActs& a, T* dx) {
  const Dev dev{};
  const int d = c_.hidden_size;
  const std::int64_t nd = a.x_mid.size(), N = nd / d;
  const double eps = c_.rms_norm_eps;
  Block& b = blocks_[l];
  const profile::Region region("layer");
  Buffer<Dev, T> dh(static_cast<std::size_t>(nd)), tmp(static_cast<std::size_t>(nd));
  b.mlp->rebind_input(a.h2.view());
  b.mlp->backward(dx, dh.data());
  a.h2.clear();
  ops::rmsnorm_backward(dev, a.x_mid.view(), params_.value(b.post_norm), dh.data(), N, d, eps,
                        tmp.data(), params_.grad(b.post_norm));
  a.x_mid.clear();
  ops::add(dev, dx, dx, tmp.data(), nd);  // dx is now d(x_mid)
  b.mixer->rebind_input(a.h1.view());
  b.mixer->backward(cp, dx, dh.data());
  a.h1.clear();
  ops::rmsnorm_backward(dev, x_in.view(), params_.value(b.input_norm), dh.data(), N, d, eps,
                        tmp.data(), params_.grad(b.input_norm));
  x_in.clear();
  ops::add(dev, dx, dx, tmp.data(), nd);
}

template <typename T, typename Dev>
double Model<T, Dev>::lm_head_loss(const T* hf, const std::int32_t* targets, std::int64_t N,
                                   double grad_scale, T* dh) {
  const Dev dev{};
  const int d = c_.hidden_size, Vocab = c_.vocab_size;
  const std::int64_t block = loss_block_tokens(options_.loss_block_tokens, Vocab, N);
  Buffer<Dev, T> logits(std::size_t(block * Vocab));
  // The loss and the first bad target stay in Dev's memory until the last block: one copy
  // to the host per step.
  Buffer<Dev, ops::CrossEntropyTotal> total(1);
  for (std::int64_t n0 = 0; n0 < N; n0 += block) {
    const std::int64_t n = std::min(block, N - n0);
    const T* h = hf + n0 * d;
    ops::linear_forward(dev, precision_, h, params_.value(lm_head_), n, d, Vocab, logits.data());
    ops::cross_entropy_add(dev, logits.data(), targets + n0, n, Vocab, grad_scale, logits.data(),
                           n0, total.data());  // logits now hold dlogits
    if (dh)                                    // else the forward alone (forward_loss)
      ops::linear_backward(dev, precision_, h, params_.value(lm_head_), logits.data(), n, d, Vocab,
                           dh + n0 * d, params_.grad(lm_head_));
  }
  ops::CrossEntropyTotal sum;
  Dev::download(&sum, total.data(), 1);
  ops::check_targets(sum, Vocab);
  return sum.loss;
}

template <typename T, typename Dev>
typename Model<T, Dev>::Losses Model<T, Dev>::forward_backward(const StepShard& s,
                                                               const std::int32_t* tokens,
                                                               const std::int32_t* targets, int B,
                                                               double grad_scale,
                                                               double aux_scale) {
  GDN_CHECK(comms_.cp, "Model::forward_backward before set_comms");
  const CpContext cp = CpContext::of(*comms_.cp, s, comms_.cp_options);
  const Dev dev{};
  const int d = c_.hidden_size, Vocab = c_.vocab_size;
  const std::int64_t N = std::int64_t(B) * cp.tokens(), nd = N * d;
  const double eps = c_.rms_norm_eps;
  const std::size_t L = blocks_.size();
  const bool recompute = options_.recompute;
  ParamStore<T, Dev>& ps = params_;
  // The residual stream at each layer's input (kept either way: in the bf16 mode in bf16
  // once no forward reads it), and each layer's other activations: kept per layer, or,
  // recomputing, one set made again before each backward.
  std::vector<Kept<T, Dev>> x_in(L + 1);
  x_in[0].open(nd, precision_);
  std::vector<LayerActs> acts(recompute ? 1 : L);
  // The router's statistics of every MoE layer, summed as each layer runs: [A, S, R].
  const int E = c_.num_experts;
  std::vector<double> router(2 * std::size_t(std::max(E, 0)) + 1, 0.0);

  acquire(0);
  {
    const profile::Region region("embed");
    ops::embedding_forward(dev, tokens, ps.value(embed_), N, Vocab, d, x_in[0].values());
  }
  release(0, false);
  for (std::size_t l = 0; l < L; ++l) {
    LayerActs& a = acts[recompute ? 0 : l];
    acquire_layer(l);
    layer_forward(l, cp, B, x_in[l].values(), a, x_in[l + 1].open(nd, precision_));
    release_layer(l, false);
    if (!recompute) x_in[l].seal();  // recomputing, the layer's forward runs again from it
    Block& b = blocks_[l];
    if (b.moe) {
      b.mlp->add_router_stats(router.data(), router.data() + E);
      router[2 * std::size_t(E)] += double(N);
    }
    if (recompute) {
      // What came from other ranks stays, and a GDN core's per-chunk entry states, from
      // which its recomputed forward makes the outputs without the sequential pass.
      b.mixer->release(Keep::replay);
      b.mlp->release(Keep::replay);
    }
  }
  // Final norm, then the LM head and cross-entropy, fused block by block.
  const std::size_t head = head_unit();
  acquire(head);
  if (lm_head_ == embed_) acquire(0);
  Buffer<Dev, T> hf(nd), dh(nd), dx(nd);
  Losses losses;
  {
    const profile::Region region("head");
    ops::rmsnorm_forward(dev, x_in[L].values(), ps.value(final_norm_), N, d, eps, hf.data());
    losses.ce_sum = lm_head_loss(hf.data(), targets, N, grad_scale, dh.data());
  }
  if (c_.num_moe_layers() > 0) {
    const profile::Region region("moe");
    losses.aux = router_loss(router, c_.output_router_logits, aux_scale);
  }

  // Backward, mirroring the forward.
  {
    const profile::Region region("head");
    ops::rmsnorm_backward(dev, x_in[L].values(), ps.value(final_norm_), dh.data(), N, d, eps,
                          dx.data(), ps.grad(final_norm_));
  }
  x_in[L].clear();
  release(head, true);
  if (lm_head_ == embed_) release(0, true);
  hf = Buffer<Dev, T>();
  dh = Buffer<Dev, T>();
  for (std::size_t l = L; l-- > 0;) {
    LayerActs& a = acts[recompute ? 0 : l];
    acquire_layer(l);
    if (recompute) {
      // The layer's forward again, from its kept input: the same bits as the first time.
      Buffer<Dev, T> out(static_cast<std::size_t>(nd));
      layer_forward(l, cp, B, x_in[l].values(), a, out.data());
      x_in[l].seal();  // the backward reads what it would have kept
    }
    layer_backward(l, cp, x_in[l], a, dx.data());
    release_layer(l, true);
    if (recompute) {
      blocks_[l].mixer->release(Keep::nothing);
      blocks_[l].mlp->release(Keep::nothing);
    }
    if (!recompute) a = LayerActs();
  }
  // The padding row gets no gradient from the embedding (transformers' padding_idx); the
  // tied LM head's part, added above, stays. The embedding's backward reads no values.
  acquire(0, false);
  Buffer<Dev, T> pad_row;
  T* pad_grad = ps.grad(embed_) + std::int64_t(std::max(0, c_.pad_token_id)) * d;
  if (c_.pad_token_id >= 0) {
    pad_row.resize(d);
    Dev::copy(pad_row.data(), pad_grad, std::size_t(d));
  }
  {
    const profile::Region region("embed");
    ops::embedding_backward(dev, tokens, dx.data(), N, Vocab, d, ps.grad(embed_));
  }
  if (c_.pad_token_id >= 0) Dev::copy(pad_grad, pad_row.data(), std::size_t(d));
  release(0, true);
  return losses;
}

template <typename T, typename Dev>
double Model<T, Dev>::forward_loss(const StepShard& s, const std::int32_t* tokens,
                                   const std::int32_t* targets, int B) {
  GDN_CHECK(comms_.cp, "Model::forward_loss before set_comms");
  const CpContext cp = CpContext::of(*comms_.cp, s, comms_.cp_options);
  const Dev dev{};
  const int d = c_.hidden_size, Vocab = c_.vocab_size;
  const std::int64_t N = std::int64_t(B) * cp.tokens(), nd = N * d;
  ParamStore<T, Dev>& ps = params_;
  // Two residual buffers in turn: each layer reads one and writes the other.
  Buffer<Dev, T> x(static_cast<std::size_t>(nd)), y(static_cast<std::size_t>(nd));
  acquire(0);
  ops::embedding_forward(dev, tokens, ps.value(embed_), N, Vocab, d, x.data());
  release(0, false);
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    LayerActs a;
    acquire_layer(l);
    layer_forward(l, cp, B, x.data(), a, y.data());
    release_layer(l, false);
    blocks_[l].mixer->release(Keep::nothing);
    blocks_[l].mlp->release(Keep::nothing);
    std::swap(x, y);
  }
  const std::size_t head = head_unit();
  acquire(head);
  if (lm_head_ == embed_) acquire(0);
  ops::rmsnorm_forward(dev, x.data(), ps.value(final_norm_), N, d, c_.rms_norm_eps, y.data());
  x = Buffer<Dev, T>();
  const double ce = lm_head_loss(y.data(), targets, N, 0.0, nullptr);
  release(head, false);
  if (lm_head_ == embed_) release(0, false);
  return ce;
}

#define GDN_INSTANTIATE(T, Dev) template class Model<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
