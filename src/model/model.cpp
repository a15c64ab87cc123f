#include "model/model.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embedding/embedding.h"
#include "ops/linear/linear.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "runtime/devices.h"

namespace gdn {

template <typename T, typename Dev>
Model<T, Dev>::Model(const ModelConfig& c, int chunk_size) : c_(c) {
  const int d = c.hidden_size, Vocab = c.vocab_size;
  embed_ = params_.add("model.embed_tokens.weight", {Vocab, d}, true);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Block b;
    b.input_norm = params_.add(p + "input_layernorm.weight", {d}, false);
    b.mixer = make_mixer(c.layer_type(l), params_, p, c, chunk_size);
    b.post_norm = params_.add(p + "post_attention_layernorm.weight", {d}, false);
    b.mlp = make_mlp(params_, p, c, l);
    b.moe = c.is_moe_layer(l);
    blocks_.push_back(std::move(b));
  }
  final_norm_ = params_.add("model.norm.weight", {d}, false);
  lm_head_ = c.tie_word_embeddings ? embed_ : params_.add("lm_head.weight", {Vocab, d}, true);
  params_.allocate();
}

template <typename T, typename Dev>
void Model<T, Dev>::init(std::uint64_t seed) {
  Rng rng(seed);
  const double std = c_.initializer_range;
  // RMSNorm weights stay zero: Qwen3-Next scales by (1 + w).
  std::vector<T> host(std::size_t(params_.num_elements()), T(0));
  auto normal = [&](ParamId id) {
    T* w = host.data() + params_.info(id).offset;
    for (std::int64_t i = 0; i < params_.info(id).size; ++i) w[i] = T(std * rng.normal());
  };
  normal(embed_);
  // transformers' nn.Embedding(padding_idx = pad_token_id): that row starts at zero.
  if (c_.pad_token_id >= 0)
    std::fill_n(
        host.begin() + params_.info(embed_).offset + std::int64_t(c_.pad_token_id) * c_.hidden_size,
        c_.hidden_size, T(0));
  for (const Block& b : blocks_) {
    b.mixer->init(rng, std, host);
    b.mlp->init(rng, std, host);
  }
  if (lm_head_ != embed_) normal(lm_head_);
  params_.set_values(host);
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
// Returns aux; when `train`, hands each MoE layer d(coef aux)/d p[e] = coef E A[e] / R^2.
template <typename T, typename Dev>
double Model<T, Dev>::router_loss(Communicator& batch, std::int64_t N, bool train) {
  const int E = c_.num_experts;
  std::vector<double> sums(2 * std::size_t(E) + 1, 0.0);  // A, S, R
  for (const Block& b : blocks_)
    if (b.moe) {
      b.mlp->add_router_stats(sums.data(), sums.data() + E);
      sums[2 * std::size_t(E)] += double(N);
    }
  Buffer<Dev, double> d_sums = to_device<Dev>(sums.data(), sums.size());
  batch.all_reduce_sum(d_sums.data(), sums.size(), "model.router_stats");
  Dev::download(sums.data(), d_sums.data(), sums.size());
  const double R = sums[2 * std::size_t(E)];
  double aux = 0;
  for (int e = 0; e < E; ++e) aux += (sums[std::size_t(e)] / R) * (sums[std::size_t(E + e)] / R);
  aux *= E;
  if (train) {
    std::vector<double> dprob(static_cast<std::size_t>(E));
    for (int e = 0; e < E; ++e)
      dprob[std::size_t(e)] = c_.router_aux_loss_coef * E * sums[std::size_t(e)] / (R * R);
    for (Block& b : blocks_)
      if (b.moe) b.mlp->set_router_loss_grad(dprob.data());
  }
  return aux;
}

template <typename T, typename Dev>
typename Model<T, Dev>::Losses Model<T, Dev>::forward_backward(const CpContext& cp,
                                                               Communicator& batch,
                                                               const std::int32_t* tokens,
                                                               const std::int32_t* targets, int B,
                                                               double grad_scale) {
  const Dev dev{};
  const int d = c_.hidden_size, Vocab = c_.vocab_size;
  const std::int64_t N = std::int64_t(B) * cp.tokens(), nd = N * d;
  const double eps = c_.rms_norm_eps;
  const std::size_t L = blocks_.size();
  ParamStore<T, Dev>& ps = params_;
  // count buffers of n zeros each (a loop: device buffers cannot be copied).
  auto buffers = [](std::size_t count, std::int64_t n) {
    std::vector<Buffer<Dev, T>> v(count);
    for (auto& b : v) b.resize(n);
    return v;
  };
  // The residual stream at each block's input and between mixer and MLP, and the normed
  // inputs of mixer and MLP, which they read again in the backward.
  std::vector<Buffer<Dev, T>> x_in = buffers(L + 1, nd), x_mid = buffers(L, nd);
  std::vector<Buffer<Dev, T>> h1 = buffers(L, nd), h2 = buffers(L, nd);
  Buffer<Dev, T> tmp(nd);

  ops::embedding_forward(dev, tokens, ps.value(embed_), N, Vocab, d, x_in[0].data());
  for (std::size_t l = 0; l < L; ++l) {
    Block& b = blocks_[l];
    ops::rmsnorm_forward(dev, x_in[l].data(), ps.value(b.input_norm), N, d, eps, h1[l].data());
    b.mixer->forward(cp, B, h1[l].data(), tmp.data());
    ops::add(dev, x_mid[l].data(), x_in[l].data(), tmp.data(), nd);
    ops::rmsnorm_forward(dev, x_mid[l].data(), ps.value(b.post_norm), N, d, eps, h2[l].data());
    b.mlp->forward(N, h2[l].data(), tmp.data());
    ops::add(dev, x_in[l + 1].data(), x_mid[l].data(), tmp.data(), nd);
  }
  Buffer<Dev, T> hf(nd), logits(N * std::int64_t(Vocab));
  ops::rmsnorm_forward(dev, x_in[L].data(), ps.value(final_norm_), N, d, eps, hf.data());
  ops::linear_forward(dev, hf.data(), ps.value(lm_head_), N, d, Vocab, logits.data());
  Losses losses;
  losses.ce_sum = ops::cross_entropy(dev, logits.data(), targets, N, Vocab, grad_scale,
                                     logits.data());  // logits now hold dlogits
  if (c_.num_moe_layers() > 0) losses.aux = router_loss(batch, N, c_.output_router_logits);

  // Backward, mirroring the forward.
  Buffer<Dev, T> dx(nd), dh(nd);
  ops::linear_backward(dev, hf.data(), ps.value(lm_head_), logits.data(), N, d, Vocab, dh.data(),
                       ps.grad(lm_head_));
  ops::rmsnorm_backward(dev, x_in[L].data(), ps.value(final_norm_), dh.data(), N, d, eps, dx.data(),
                        ps.grad(final_norm_));
  for (std::size_t l = L; l-- > 0;) {
    Block& b = blocks_[l];
    // x_out = x_mid + mlp(norm(x_mid))
    b.mlp->backward(dx.data(), dh.data());
    ops::rmsnorm_backward(dev, x_mid[l].data(), ps.value(b.post_norm), dh.data(), N, d, eps,
                          tmp.data(), ps.grad(b.post_norm));
    ops::add(dev, dx.data(), dx.data(), tmp.data(), nd);  // dx is now d(x_mid)
    // x_mid = x_in + mixer(norm(x_in))
    b.mixer->backward(cp, dx.data(), dh.data());
    ops::rmsnorm_backward(dev, x_in[l].data(), ps.value(b.input_norm), dh.data(), N, d, eps,
                          tmp.data(), ps.grad(b.input_norm));
    ops::add(dev, dx.data(), dx.data(), tmp.data(), nd);
  }
  // The padding row gets no gradient from the embedding (transformers' padding_idx); the
  // tied LM head's part, added above, stays.
  Buffer<Dev, T> pad_row;
  T* pad_grad = ps.grad(embed_) + std::int64_t(std::max(0, c_.pad_token_id)) * d;
  if (c_.pad_token_id >= 0) {
    pad_row.resize(d);
    Dev::copy(pad_row.data(), pad_grad, std::size_t(d));
  }
  ops::embedding_backward(dev, tokens, dx.data(), N, Vocab, d, ps.grad(embed_));
  if (c_.pad_token_id >= 0) Dev::copy(pad_grad, pad_row.data(), std::size_t(d));
  return losses;
}

#define GDN_INSTANTIATE(T, Dev) template class Model<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
