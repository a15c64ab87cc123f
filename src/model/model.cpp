#include "model/model.h"

#include <string>

#include "core/rng.h"
#include "model/ops.h"

namespace gdn {

template <typename T>
GdnModel<T>::GdnModel(const ModelConfig& c, int chunk_size) : c_(c) {
  const int d = c.hidden_size, I = c.intermediate_size, Vocab = c.vocab_size;
  embed_ = &params_.add("model.embed_tokens.weight", {Vocab, d}, true);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Param<T>& in_norm = params_.add(p + "input_layernorm.weight", {d}, false);
    auto mixer = std::make_unique<GdnLayer<T>>(params_, p + "linear_attn.", c, chunk_size);
    Param<T>& post_norm = params_.add(p + "post_attention_layernorm.weight", {d}, false);
    Param<T>& gate = params_.add(p + "mlp.gate_proj.weight", {I, d}, true);
    Param<T>& up = params_.add(p + "mlp.up_proj.weight", {I, d}, true);
    Param<T>& down = params_.add(p + "mlp.down_proj.weight", {d, I}, true);
    blocks_.push_back(Block{in_norm, std::move(mixer), post_norm, gate, up, down});
  }
  final_norm_ = &params_.add("model.norm.weight", {d}, false);
  lm_head_ = c.tie_word_embeddings ? embed_ : &params_.add("lm_head.weight", {Vocab, d}, true);
}

template <typename T>
void GdnModel<T>::init(std::uint64_t seed) {
  Rng rng(seed);
  const double std = c_.initializer_range;
  auto normal = [&](Param<T>& p) {
    for (T& w : p.value.data) w = T(std * rng.normal());
  };
  // RMSNorm weights are zero: Qwen3-Next scales by (1 + w).
  normal(*embed_);
  for (Block& b : blocks_) {
    b.mixer->init(rng, std);
    normal(b.gate_proj);
    normal(b.up_proj);
    normal(b.down_proj);
  }
  if (lm_head_ != embed_) normal(*lm_head_);
}

template <typename T>
double GdnModel<T>::forward_backward(Communicator& cp, const std::int32_t* tokens,
                                     const std::int32_t* targets, int B, std::int64_t Tl,
                                     std::int64_t T_global, double grad_scale) {
  const int d = c_.hidden_size, I = c_.intermediate_size, Vocab = c_.vocab_size;
  const std::int64_t N = std::int64_t(B) * Tl;
  const double eps = c_.rms_norm_eps;
  const std::size_t L = blocks_.size();
  // Residual stream at each block's input and between mixer and MLP; the MLP's
  // activations; everything the backward needs.
  std::vector<std::vector<T>> x_in(L + 1, std::vector<T>(N * d)), x_mid(L, std::vector<T>(N * d));
  std::vector<std::vector<T>> h1(L, std::vector<T>(N * d)), h2(L, std::vector<T>(N * d));
  std::vector<std::vector<T>> gate(L, std::vector<T>(N * I)), up(L, std::vector<T>(N * I)),
      act(L, std::vector<T>(N * I));
  std::vector<T> tmp(N * d);

  ops::embedding_forward(tokens, embed_->value.ptr(), N, Vocab, d, x_in[0].data());
  for (std::size_t l = 0; l < L; ++l) {
    Block& b = blocks_[l];
    ops::rmsnorm_forward(x_in[l].data(), b.input_norm.value.ptr(), N, d, eps, h1[l].data());
    b.mixer->forward(cp, B, Tl, T_global, h1[l].data(), tmp.data());
    for (std::int64_t i = 0; i < N * d; ++i) x_mid[l][i] = x_in[l][i] + tmp[i];
    ops::rmsnorm_forward(x_mid[l].data(), b.post_norm.value.ptr(), N, d, eps, h2[l].data());
    ops::linear_forward(h2[l].data(), b.gate_proj.value.ptr(), N, d, I, gate[l].data());
    ops::linear_forward(h2[l].data(), b.up_proj.value.ptr(), N, d, I, up[l].data());
    ops::swiglu_forward(gate[l].data(), up[l].data(), N * I, act[l].data());
    ops::linear_forward(act[l].data(), b.down_proj.value.ptr(), N, I, d, tmp.data());
    for (std::int64_t i = 0; i < N * d; ++i) x_in[l + 1][i] = x_mid[l][i] + tmp[i];
  }
  std::vector<T> hf(N * d), logits(N * std::int64_t(Vocab));
  ops::rmsnorm_forward(x_in[L].data(), final_norm_->value.ptr(), N, d, eps, hf.data());
  ops::linear_forward(hf.data(), lm_head_->value.ptr(), N, d, Vocab, logits.data());
  const double loss_sum = ops::cross_entropy(logits.data(), targets, N, Vocab, grad_scale,
                                             logits.data());  // logits now hold dlogits

  // Backward, mirroring the forward.
  std::vector<T> dx(N * d), dh(N * d), dact(N * I), dgate(N * I), dup(N * I);
  ops::linear_backward(hf.data(), lm_head_->value.ptr(), logits.data(), N, d, Vocab, dh.data(),
                       lm_head_->grad.ptr());
  ops::rmsnorm_backward(x_in[L].data(), final_norm_->value.ptr(), dh.data(), N, d, eps, dx.data(),
                        final_norm_->grad.ptr());
  for (std::size_t l = L; l-- > 0;) {
    Block& b = blocks_[l];
    // x_out = x_mid + down(swiglu(gate(h2), up(h2))), h2 = norm(x_mid)
    ops::linear_backward(act[l].data(), b.down_proj.value.ptr(), dx.data(), N, I, d, dact.data(),
                         b.down_proj.grad.ptr());
    ops::swiglu_backward(gate[l].data(), up[l].data(), dact.data(), N * I, dgate.data(),
                         dup.data());
    ops::linear_backward(h2[l].data(), b.gate_proj.value.ptr(), dgate.data(), N, d, I, dh.data(),
                         b.gate_proj.grad.ptr());
    ops::linear_backward(h2[l].data(), b.up_proj.value.ptr(), dup.data(), N, d, I, tmp.data(),
                         b.up_proj.grad.ptr());
    for (std::int64_t i = 0; i < N * d; ++i) dh[i] += tmp[i];
    ops::rmsnorm_backward(x_mid[l].data(), b.post_norm.value.ptr(), dh.data(), N, d, eps,
                          tmp.data(), b.post_norm.grad.ptr());
    for (std::int64_t i = 0; i < N * d; ++i) dx[i] += tmp[i];  // dx is now d(x_mid)
    // x_mid = x_in + mixer(norm(x_in))
    b.mixer->backward(cp, dx.data(), dh.data());
    ops::rmsnorm_backward(x_in[l].data(), b.input_norm.value.ptr(), dh.data(), N, d, eps,
                          tmp.data(), b.input_norm.grad.ptr());
    for (std::int64_t i = 0; i < N * d; ++i) dx[i] += tmp[i];
  }
  ops::embedding_backward(tokens, dx.data(), N, Vocab, d, embed_->grad.ptr());
  return loss_sum;
}

template class GdnModel<float>;
template class GdnModel<double>;

}  // namespace gdn
