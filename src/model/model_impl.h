// GdnModel's construction, initialisation and step, written once over its Backend.
// Included by the files that instantiate it for a backend (model.cpp: host; the CUDA
// library: device).
#pragma once

#include <string>
#include <utility>

#include "core/rng.h"
#include "model/gdn_layer_impl.h"
#include "model/model.h"

namespace gdn {

template <typename T, typename Backend>
GdnModel<T, Backend>::GdnModel(const ModelConfig& c, int chunk_size, Backend backend)
    : c_(c), be_(std::move(backend)) {
  const int d = c.hidden_size, I = c.intermediate_size, Vocab = c.vocab_size;
  embed_ = &params_.add("model.embed_tokens.weight", {Vocab, d}, true);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Param<T>& in_norm = params_.add(p + "input_layernorm.weight", {d}, false);
    auto mixer =
        std::make_unique<GdnLayer<T, Backend>>(params_, p + "linear_attn.", c, chunk_size, be_);
    Param<T>& post_norm = params_.add(p + "post_attention_layernorm.weight", {d}, false);
    Param<T>& gate = params_.add(p + "mlp.gate_proj.weight", {I, d}, true);
    Param<T>& up = params_.add(p + "mlp.up_proj.weight", {I, d}, true);
    Param<T>& down = params_.add(p + "mlp.down_proj.weight", {d, I}, true);
    blocks_.push_back(Block{in_norm, std::move(mixer), post_norm, gate, up, down});
  }
  final_norm_ = &params_.add("model.norm.weight", {d}, false);
  lm_head_ = c.tie_word_embeddings ? embed_ : &params_.add("lm_head.weight", {Vocab, d}, true);
  // Every parameter is known now: a device backend (shared with the layers) sizes its copies.
  be_.attach(params_);
}

template <typename T, typename Backend>
void GdnModel<T, Backend>::init(std::uint64_t seed) {
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
  upload_params();
}

template <typename T, typename Backend>
double GdnModel<T, Backend>::forward_backward(Communicator& cp, const std::int32_t* tokens,
                                              const std::int32_t* targets, int B, std::int64_t Tl,
                                              std::int64_t T_global, double grad_scale) {
  const int d = c_.hidden_size, I = c_.intermediate_size, Vocab = c_.vocab_size;
  const std::int64_t N = std::int64_t(B) * Tl;
  const double eps = c_.rms_norm_eps;
  const std::size_t L = blocks_.size();
  Backend& be = be_;
  auto W = [&](const Param<T>& p) { return be.value(p); };
  auto G = [&](Param<T>& p) { return be.grad(p); };
  // count buffers of n zeros each (a loop: device vectors cannot be copied).
  auto buffers = [](std::size_t count, std::int64_t n) {
    std::vector<Vector> v(count);
    for (Vector& b : v) b.resize(n);
    return v;
  };
  // Residual stream at each block's input and between mixer and MLP; the MLP's
  // activations; everything the backward needs.
  std::vector<Vector> x_in = buffers(L + 1, N * d), x_mid = buffers(L, N * d);
  std::vector<Vector> h1 = buffers(L, N * d), h2 = buffers(L, N * d);
  std::vector<Vector> gate = buffers(L, N * I), up = buffers(L, N * I), act = buffers(L, N * I);
  Vector tmp(N * d);
  const std::size_t nd = std::size_t(N) * d;

  be.embedding_forward(tokens, W(*embed_), N, Vocab, d, x_in[0].data());
  for (std::size_t l = 0; l < L; ++l) {
    Block& b = blocks_[l];
    be.rmsnorm_forward(x_in[l].data(), W(b.input_norm), N, d, eps, h1[l].data());
    b.mixer->forward(cp, B, Tl, T_global, h1[l].data(), tmp.data());
    be.add(x_mid[l].data(), x_in[l].data(), tmp.data(), nd);
    be.rmsnorm_forward(x_mid[l].data(), W(b.post_norm), N, d, eps, h2[l].data());
    be.linear_forward(h2[l].data(), W(b.gate_proj), N, d, I, gate[l].data());
    be.linear_forward(h2[l].data(), W(b.up_proj), N, d, I, up[l].data());
    be.swiglu_forward(gate[l].data(), up[l].data(), N * I, act[l].data());
    be.linear_forward(act[l].data(), W(b.down_proj), N, I, d, tmp.data());
    be.add(x_in[l + 1].data(), x_mid[l].data(), tmp.data(), nd);
  }
  Vector hf(N * d), logits(N * std::int64_t(Vocab));
  be.rmsnorm_forward(x_in[L].data(), W(*final_norm_), N, d, eps, hf.data());
  be.linear_forward(hf.data(), W(*lm_head_), N, d, Vocab, logits.data());
  const double loss_sum = be.cross_entropy(logits.data(), targets, N, Vocab, grad_scale,
                                           logits.data());  // logits now hold dlogits

  // Backward, mirroring the forward.
  Vector dx(N * d), dh(N * d), dact(N * I), dgate(N * I), dup(N * I);
  be.linear_backward(hf.data(), W(*lm_head_), logits.data(), N, d, Vocab, dh.data(), G(*lm_head_));
  be.rmsnorm_backward(x_in[L].data(), W(*final_norm_), dh.data(), N, d, eps, dx.data(),
                      G(*final_norm_));
  for (std::size_t l = L; l-- > 0;) {
    Block& b = blocks_[l];
    // x_out = x_mid + down(swiglu(gate(h2), up(h2))), h2 = norm(x_mid)
    be.linear_backward(act[l].data(), W(b.down_proj), dx.data(), N, I, d, dact.data(),
                       G(b.down_proj));
    be.swiglu_backward(gate[l].data(), up[l].data(), dact.data(), N * I, dgate.data(), dup.data());
    be.linear_backward(h2[l].data(), W(b.gate_proj), dgate.data(), N, d, I, dh.data(),
                       G(b.gate_proj));
    be.linear_backward(h2[l].data(), W(b.up_proj), dup.data(), N, d, I, tmp.data(), G(b.up_proj));
    be.add(dh.data(), dh.data(), tmp.data(), nd);
    be.rmsnorm_backward(x_mid[l].data(), W(b.post_norm), dh.data(), N, d, eps, tmp.data(),
                        G(b.post_norm));
    be.add(dx.data(), dx.data(), tmp.data(), nd);  // dx is now d(x_mid)
    // x_mid = x_in + mixer(norm(x_in))
    b.mixer->backward(cp, dx.data(), dh.data());
    be.rmsnorm_backward(x_in[l].data(), W(b.input_norm), dh.data(), N, d, eps, tmp.data(),
                        G(b.input_norm));
    be.add(dx.data(), dx.data(), tmp.data(), nd);
  }
  be.embedding_backward(tokens, dx.data(), N, Vocab, d, G(*embed_));
  return loss_sum;
}

}  // namespace gdn
