#include "model/model.h"

#include <string>

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
  for (const Block& b : blocks_) {
    b.mixer->init(rng, std, host);
    b.mlp->init(rng, std, host);
  }
  if (lm_head_ != embed_) normal(lm_head_);
  params_.set_values(host);
}

template <typename T, typename Dev>
double Model<T, Dev>::forward_backward(const CpContext& cp, const std::int32_t* tokens,
                                       const std::int32_t* targets, int B, double grad_scale) {
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
  const double loss_sum = ops::cross_entropy(dev, logits.data(), targets, N, Vocab, grad_scale,
                                             logits.data());  // logits now hold dlogits

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
  ops::embedding_backward(dev, tokens, dx.data(), N, Vocab, d, ps.grad(embed_));
  return loss_sum;
}

#define GDN_INSTANTIATE(T, Dev) template class Model<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
