// The gated full-attention layer of Qwen3-Next and Qwen3.5 (Qwen3NextAttention),
// forward and backward, on one context-parallel shard:
//
//   x -> q_proj -> per head [query (D) | gate (D)];  x -> k_proj, v_proj (Hkv heads)
//   query, key: zero-centred RMSNorm over head_dim (q_norm, k_norm), then partial RoPE
//   at global positions (the first rotary_dim of each head, rotate_half convention)
//   a = softmax(q k^T / sqrt(D), causal) v with GQA (cp/attention_cp.h: K, V gathered)
//   y = o_proj( a * sigmoid(gate) )
//
// Biases on all four projections when attention_bias. On either device: every step is an op
// of src/ops or a copy through Dev.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cp/attention_cp.h"
#include "model/mixer.h"
#include "ops/convert/kept.h"

namespace gdn {

template <typename T, typename Dev>
class AttentionMixer final : public Mixer<T, Dev> {
 public:
  // Registers the parameters under prefix + "self_attn.".
  AttentionMixer(ParamStore<T, Dev>& ps, const std::string& prefix, const ModelConfig& c,
                 Precision precision = Precision::plain);

  // transformers' _init_weights: projections N(0, std), biases 0, q_norm and k_norm 0.
  void init(Rng& rng, double std, const HostParams<T>& host) const override;
  const char* kind() const override { return "attention"; }
  void rebind_input(const T* x) override { x_ = x; }
  static ActivationElems activations(const ModelConfig& c, const ShardShape& s);
  std::int64_t attention_pairs() const override { return core_.pairs() * Hq_; }

 protected:
  // A recomputing forward exchanges K and V again: they are as large as the layer's
  // activations, so Keep::replay keeps nothing either.
  void do_forward(const CpContext& cp, int B, const T* x, T* y, bool replay) override;
  void do_backward(const CpContext& cp, const T* dy, T* dx) override;
  void do_release(Keep keep) override;

 private:
  int q_width() const { return Hq_ * D_; }
  int kv_width() const { return Hkv_ * D_; }

  ParamStore<T, Dev>& ps_;
  // Precision::bf16: the layer's matmuls on bf16 operands, its activations kept in bf16
  // (core/precision.h).
  Precision precision_;
  int d_, Hq_, Hkv_, D_, R_;
  double theta_, eps_;
  bool bias_;
  ParamId q_proj_, k_proj_, v_proj_, o_proj_, q_norm_, k_norm_;
  ParamId q_bias_ = 0, k_bias_ = 0, v_bias_ = 0, o_bias_ = 0;

  // The last forward.
  int B_ = 0;
  const T* x_ = nullptr;
  Buffer<Dev, std::int64_t> pos_;  // global position of each row (for RoPE, in Dev's memory)
  // q and the core's output attn: the core reads them in its backward (it keeps its own
  // copies of k and v). In the bf16 mode they are bf16 values: kept in bf16, exactly.
  Kept<T, Dev> q_, attn_;
  Kept<T, Dev> q_raw_, gate_, k_raw_, gated_;
  AttentionContextParallel<T, Dev> core_;
};

}  // namespace gdn
