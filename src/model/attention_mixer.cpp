#include "model/attention_mixer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/bias/bias.h"
#include "ops/convert/convert.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "ops/rope/rope.h"
#include "runtime/devices.h"

namespace gdn {

template <typename T, typename Dev>
AttentionMixer<T, Dev>::AttentionMixer(ParamStore<T, Dev>& ps, const std::string& prefix,
                                       const ModelConfig& c, Precision precision)
    : Mixer<T, Dev>(prefix + "self_attn"),
      ps_(ps),
      precision_(precision),
      d_(c.hidden_size),
      Hq_(c.num_attention_heads),
      Hkv_(c.num_key_value_heads),
      D_(c.head_dim),
      R_(c.rotary_dim()),
      theta_(c.rope_theta),
      eps_(c.rms_norm_eps),
      bias_(c.attention_bias) {
  const std::string p = prefix + "self_attn.";
  q_proj_ = ps.add(p + "q_proj.weight", {2 * q_width(), d_}, true);
  k_proj_ = ps.add(p + "k_proj.weight", {kv_width(), d_}, true);
  v_proj_ = ps.add(p + "v_proj.weight", {kv_width(), d_}, true);
  o_proj_ = ps.add(p + "o_proj.weight", {d_, q_width()}, true);
  q_norm_ = ps.add(p + "q_norm.weight", {D_}, false);
  k_norm_ = ps.add(p + "k_norm.weight", {D_}, false);
  if (bias_) {
    q_bias_ = ps.add(p + "q_proj.bias", {2 * q_width()}, false);
    k_bias_ = ps.add(p + "k_proj.bias", {kv_width()}, false);
    v_bias_ = ps.add(p + "v_proj.bias", {kv_width()}, false);
    o_bias_ = ps.add(p + "o_proj.bias", {d_}, false);
  }
}

template <typename T, typename Dev>
void AttentionMixer<T, Dev>::init(Rng& rng, double std, const HostParams<T>& host) const {
  // Biases and the norms stay zero (the norms scale by 1 + w).
  for (ParamId id : {q_proj_, k_proj_, v_proj_, o_proj_}) {
    T* w = host.at(ps_.info(id));
    for (std::int64_t i = 0; i < ps_.info(id).size; ++i) w[i] = T(std * rng.normal());
  }
}

template <typename T, typename Dev>
ActivationElems AttentionMixer<T, Dev>::activations(const ModelConfig& c, const ShardShape& s) {
  const std::int64_t N = s.tokens(), qw = std::int64_t(c.num_attention_heads) * c.head_dim;
  const std::int64_t kv = std::int64_t(c.num_key_value_heads) * c.head_dim;
  const std::int64_t whole = std::int64_t(s.B) * s.T;  // rows of the gathered K, V
  ActivationElems a;
  // q_raw, gate, q, attn, gated; k_raw; the gathered K, V (the core's copies); lse; the
  // balanced query set's q and o (about N rows).
  const std::int64_t core_kept = 2 * N * qw + 2 * whole * kv + 2 * N * qw;
  a.kept = N * (3 * qw + kv + c.num_attention_heads) + core_kept;
  // All but lse are kept in bf16 in the bf16 mode (ops/convert/kept.h). The backward decodes
  // q_raw, gate, gated and k_raw one at a time, and what the core reads all at once.
  a.kept_bf16 = N * (3 * qw + kv) + core_kept;
  a.decoded = core_kept;
  // Backward, each buffer freed after its last reader (do_backward): at most dattn, dgate,
  // dq, dk, dv with the core's dK, dV of the whole sequence and their reduce-scatter buffer,
  // or dgate, dq_raw, dqg, dk_raw, dv (and dk) after it; dx part.
  a.transient =
      std::max(N * (3 * qw + 2 * kv) + 4 * whole * kv, N * (4 * qw + 3 * kv)) + N * c.hidden_size;
  return a;
}

template <typename T, typename Dev>
void AttentionMixer<T, Dev>::do_forward(const CpContext& cp, int B, const T* x, T* y, bool) {
  const Dev dev{};
  B_ = B;
  x_ = x;
  const std::int64_t Tl = cp.tokens(), N = std::int64_t(B) * Tl;
  const int qw = q_width(), kv = kv_width();
  // Projections; q_proj's rows are per head [query | gate].
  Buffer<Dev, T> qg(N * 2 * qw), k(N * kv), v(N * kv);
  ops::linear_forward(dev, precision_, x, ps_.value(q_proj_), N, d_, 2 * qw, qg.data());
  ops::linear_forward(dev, precision_, x, ps_.value(k_proj_), N, d_, kv,
                      k_raw_.open(N * kv, precision_));
  ops::linear_forward(dev, precision_, x, ps_.value(v_proj_), N, d_, kv, v.data());
  if (bias_) {
    ops::bias_add(dev, qg.data(), ps_.value(q_bias_), N, 2 * qw);
    ops::bias_add(dev, k_raw_.values(), ps_.value(k_bias_), N, kv);
    ops::bias_add(dev, v.data(), ps_.value(v_bias_), N, kv);
  }
  Dev::copy_rows(q_raw_.open(N * qw, precision_), D_, qg.data(), 2 * D_, D_, N * Hq_);
  Dev::copy_rows(gate_.open(N * qw, precision_), D_, qg.data() + D_, 2 * D_, D_, N * Hq_);
  // Per-head norms, then RoPE at the rows' global positions.
  T* q = q_.open(N * qw, precision_);
  ops::rmsnorm_forward(dev, q_raw_.values(), ps_.value(q_norm_), N * Hq_, D_, eps_, q);
  ops::rmsnorm_forward(dev, k_raw_.values(), ps_.value(k_norm_), N * Hkv_, D_, eps_, k.data());
  q_raw_.seal();
  k_raw_.seal();
  // Global positions, or with packed documents the positions inside each document.
  std::vector<std::int64_t> pos(static_cast<std::size_t>(N));
  if (cp.documents) {
    pos = cp.documents->positions(cp.shard);
  } else {
    for (int b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < Tl; ++t) pos[std::size_t(b * Tl + t)] = cp.shard.begin + t;
  }
  pos_ = to_device<Dev>(pos.data(), pos.size());
  ops::rope_forward(dev, q, pos_.data(), N, Hq_, D_, R_, theta_, q);
  ops::rope_forward(dev, k.data(), pos_.data(), N, Hkv_, D_, R_, theta_, k.data());
  // Attention over the whole sequence, then the sigmoid gate and o_proj.
  const AttentionDims dims{B, Hq_, Hkv_, D_, 1.0 / std::sqrt(double(D_)), precision_};
  const bool bf16 = precision_ == Precision::bf16;  // q, k, v and the output stored as bf16 values
  if (bf16) {
    ops::round_to_bf16(dev, q, N * qw);
    for (Buffer<Dev, T>* b : {&k, &v}) ops::round_to_bf16(dev, b->data(), b->size());
  }
  T* attn = attn_.open(N * qw, precision_);
  {
    const profile::Scope core_scope("attention_core");
    core_.forward(cp, dims, q, k.data(), v.data(), attn);
  }
  if (bf16) ops::round_to_bf16(dev, attn, N * qw);
  ops::sigmoid_gate_forward(dev, attn, gate_.values(), N * qw, gated_.open(N * qw, precision_));
  ops::linear_forward(dev, precision_, gated_.values(), ps_.value(o_proj_), N, qw, d_, y);
  for (Kept<T, Dev>* b : {&q_, &attn_, &gate_, &gated_}) b->seal();
  if (bias_) ops::bias_add(dev, y, ps_.value(o_bias_), N, d_);
}

template <typename T, typename Dev>
void AttentionMixer<T, Dev>::do_backward(const CpContext& cp, const T* dy, T* dx) {
  const Dev dev{};
  const std::int64_t N = std::int64_t(B_) * cp.tokens();
  const int qw = q_width(), kv = kv_width();
  // Each scratch buffer goes as soon as its last reader is done (docs/design.md §6b).
  Buffer<Dev, T> dattn(N * qw), dgate(N * qw);
  {
    Buffer<Dev, T> dgated(N * qw);
    ops::linear_backward(dev, precision_, gated_.view(), ps_.value(o_proj_), dy, N, qw, d_,
                         dgated.data(), ps_.grad(o_proj_));
    gated_.clear();
    if (bias_) ops::bias_backward(dev, dy, N, d_, ps_.grad(o_bias_));
    ops::sigmoid_gate_backward(dev, attn_.view(), gate_.view(), dgated.data(), N * qw, dattn.data(),
                               dgate.data());
  }
  gate_.clear();
  Buffer<Dev, T> dq(N * qw), dk(N * kv), dv(N * kv);
  if (precision_ == Precision::bf16) ops::round_to_bf16(dev, dattn.data(), dattn.size());
  {
    const profile::Scope core_scope("attention_core");
    if (q_.bf16()) core_.rebind(q_.view(), attn_.view());
    core_.backward(cp, dattn.data(), dq.data(), dk.data(), dv.data());
  }
  q_.clear();
  attn_.clear();
  dattn = Buffer<Dev, T>();
  ops::rope_backward(dev, dq.data(), pos_.data(), N, Hq_, D_, R_, theta_, dq.data());
  ops::rope_backward(dev, dk.data(), pos_.data(), N, Hkv_, D_, R_, theta_, dk.data());
  // Back through the norms; the query gradient and the gate's interleave per head again.
  Buffer<Dev, T> dq_raw(N * qw), dk_raw(N * kv);
  ops::rmsnorm_backward(dev, q_raw_.view(), ps_.value(q_norm_), dq.data(), N * Hq_, D_, eps_,
                        dq_raw.data(), ps_.grad(q_norm_));
  q_raw_.clear();
  dq = Buffer<Dev, T>();
  ops::rmsnorm_backward(dev, k_raw_.view(), ps_.value(k_norm_), dk.data(), N * Hkv_, D_, eps_,
                        dk_raw.data(), ps_.grad(k_norm_));
  k_raw_.clear();
  dk = Buffer<Dev, T>();
  Buffer<Dev, T> dqg(N * 2 * qw);
  Dev::copy_rows(dqg.data(), 2 * D_, dq_raw.data(), D_, D_, N * Hq_);
  Dev::copy_rows(dqg.data() + D_, 2 * D_, dgate.data(), D_, D_, N * Hq_);
  for (Buffer<Dev, T>* b : {&dq_raw, &dgate}) *b = Buffer<Dev, T>();
  if (bias_) {
    ops::bias_backward(dev, dqg.data(), N, 2 * qw, ps_.grad(q_bias_));
    ops::bias_backward(dev, dk_raw.data(), N, kv, ps_.grad(k_bias_));
    ops::bias_backward(dev, dv.data(), N, kv, ps_.grad(v_bias_));
  }
  // The three input projections share x: their input gradients add up, q, k, v in turn.
  ops::linear_backward(dev, precision_, x_, ps_.value(q_proj_), dqg.data(), N, d_, 2 * qw, dx,
                       ps_.grad(q_proj_));
  ops::linear_backward(dev, precision_, x_, ps_.value(k_proj_), dk_raw.data(), N, d_, kv, dx,
                       ps_.grad(k_proj_),
                       /*accumulate=*/true);
  ops::linear_backward(dev, precision_, x_, ps_.value(v_proj_), dv.data(), N, d_, kv, dx,
                       ps_.grad(v_proj_),
                       /*accumulate=*/true);
}

template <typename T, typename Dev>
void AttentionMixer<T, Dev>::do_release(Keep keep) {
  for (Kept<T, Dev>* b : {&q_, &attn_, &q_raw_, &gate_, &k_raw_, &gated_}) b->clear();
  core_.release(keep);
}

#define GDN_INSTANTIATE(T, Dev) template class AttentionMixer<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
