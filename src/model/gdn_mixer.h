// The Qwen3-Next Gated DeltaNet layer (docs/design.md §5), forward and backward, on one
// context-parallel shard:
//
//   x -> in_proj_qkv -> q, k (Hk K each), v (Hv V);  in_proj_z -> z;  in_proj_b, in_proj_a
//   -> b, a (Hv each): Qwen3.5's names and layouts (Qwen3-Next's interleaved in_proj_qkvz
//   and in_proj_ba are mapped to these when its checkpoints are read, hf_weights.h)
//   causal depthwise conv1d (kernel W, halo from the previous rank) over [q|k|v], SiLU
//   beta = sigmoid(b);  g = -exp(A_log) softplus(a + dt_bias)
//   o = GDN core with L2-normalised q, k (three-phase CP, cp/gdn_cp.h)
//   With packed documents (cp.documents) the conv leaves out the taps before a document's
//   start and the core runs each batch row as its own packed problem (cu_seqlens): the
//   state resets at every boundary, wherever it falls among the ranks.
//   y = out_proj( RMSNorm(o) * norm.weight * SiLU(z) )   (gated RMSNorm per value head)
//
// Only the conv halo and the core's fixed-size pairs cross ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cp/gdn_layer_core.h"
#include "model/mixer.h"
#include "ops/convert/kept.h"

namespace gdn {

template <typename T, typename Dev>
class GdnMixer final : public Mixer<T, Dev> {
 public:
  // Registers the parameters under prefix + "linear_attn.".
  GdnMixer(ParamStore<T, Dev>& ps, const std::string& prefix, const ModelConfig& c, int chunk_size,
           Precision precision = Precision::plain);

  // transformers' _init_weights: projections and conv1d ~ N(0, std),
  // A_log = log U(0.01, 16), dt_bias = 1, norm weight = 1.
  void init(Rng& rng, double std, const HostParams<T>& host) const override;
  const char* kind() const override { return "gdn"; }
  void rebind_input(const T* x) override { x_ = x; }
  // What forward keeps for backward, and backward's scratch, on a shard.
  static ActivationElems activations(const ModelConfig& c, const ShardShape& s);

 protected:
  void do_forward(const CpContext& cp, int B, const T* x, T* y, bool replay) override;
  void do_backward(const CpContext& cp, const T* dy, T* dx) override;
  // Keep::replay keeps the conv halo and the CP core's per-chunk entry states and gathered
  // pairs: the recomputed forward exchanges nothing, and its core remakes the outputs from
  // those states in parallel over chunks instead of walking the shard's chunks in order.
  void do_release(Keep keep) override;

 private:
  int qk_dim() const { return Hk_ * K_; }
  int v_dim() const { return Hv_ * V_; }
  int conv_dim() const { return 2 * qk_dim() + v_dim(); }

  ParamStore<T, Dev>& ps_;
  // Precision::bf16: the layer's matmuls on bf16 operands, its activations kept in bf16
  // (core/precision.h).
  Precision precision_;
  int d_, Hk_, Hv_, K_, V_, W_, chunk_;
  double eps_;
  ParamId in_proj_qkv_, in_proj_z_, in_proj_b_, in_proj_a_, conv1d_, A_log_, dt_bias_, norm_,
      out_proj_;

  // The last forward: its input and activations, and the CP core (kept for the run).
  int B_ = 0;
  const T* x_ = nullptr;
  Buffer<Dev, T> b_, a_, g_;
  // q, k, v, beta: the core's inputs, which its backward reads (in the bf16 mode they are
  // bf16 values, so keeping them in bf16 is exact; the core is rebound to the decoded ones).
  Kept<T, Dev> q_, k_, v_, beta_;
  Kept<T, Dev> z_, conv_in_, o_, normed_;
  Buffer<Dev, T> halo_;  // the W - 1 rows before the shard, from the previous rank
  // With documents: each row's tokens' positions in their documents [B, Tl] (the conv's
  // reach), else empty.
  Buffer<Dev, std::int64_t> pos_;
  GdnLayerCore<T, Dev> core_;  // the CP core, documents-aware (kept for the run)
};

}  // namespace gdn
