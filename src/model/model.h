// The language model (Qwen3-Next / Qwen3.5 layout, docs/design.md §6):
//
//   token embedding -> L x [ x += mixer(RMSNorm(x));  x += mlp(RMSNorm(x)) ]
//                   -> RMSNorm -> LM head (tied or not) -> cross-entropy
//                   (+ router_aux_loss_coef * the MoE load-balancing loss)
//
// Each layer's mixer (GDN or gated attention) and MLP (dense or MoE) come from the config
// (make_mixer, make_mlp). Everything but the mixers is per token; under context
// parallelism each rank runs its shard and the mixers exchange what they need through the
// CpContext. Parameter names follow transformers' modelling code (hf_weights.h maps them
// to each family's checkpoints); the parameters and gradients are two flat buffers in
// Dev's memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "cp/cp_context.h"
#include "model/mixer.h"
#include "model/mlp.h"
#include "model/model_config.h"
#include "model/params.h"

namespace gdn {

// How forward_backward trades memory for time (docs/design.md §6b).
struct ModelOptions {
  // Activation recomputation: keep only each layer's input from the forward and run the
  // layer's forward again just before its backward. Losses and gradients are bit-identical.
  bool recompute = false;
  // Tokens per block of the fused LM head and cross-entropy: the [tokens x vocab] logits
  // exist one block at a time. 0: as many as fit kLossBlockElems logits.
  std::int64_t loss_block_tokens = 0;
};
inline constexpr std::int64_t kLossBlockElems = std::int64_t(1) << 24;

// The parameters a model of this config has (without allocating them).
std::int64_t parameter_count(const ModelConfig& c);

template <typename T, typename Dev>
class Model {
 public:
  Model(const ModelConfig& c, int chunk_size, ModelOptions options = {});

  ParamStore<T, Dev>& params() { return params_; }
  const ParamStore<T, Dev>& params() const { return params_; }
  const ModelConfig& config() const { return c_; }

  // Qwen3-Next initialisation from one seed, in parameter order: identical on every rank
  // and for every dp x cp layout.
  void init(std::uint64_t seed);

  struct Losses {
    double ce_sum = 0;  // this shard's summed token cross-entropies (unscaled)
    // transformers' load_balancing_loss_func over the global batch (the same on every
    // rank; 0 without MoE layers). Its gradient is trained when output_router_logits.
    double aux = 0;
  };
  // One shard: tokens and targets [B, Tl] (positions cp.shard of B sequences of
  // cp.T_global tokens), in Dev's memory. Runs the forward and the backward,
  // accumulating the parameter gradients of ce_sum * grad_scale (+ router_aux_loss_coef
  // * aux when output_router_logits; each rank adds its tokens' part, so the gradients
  // summed over `batch` are the whole batch's). `batch` holds every rank of the global
  // batch (dp x cp; it reduces the router's sums). Collective over cp.comm and batch.
  Losses forward_backward(const CpContext& cp, Communicator& batch, const std::int32_t* tokens,
                          const std::int32_t* targets, int B, double grad_scale);

  // The (query, key) pairs of the attention layers' last forward on this rank, per
  // sequence, over layers and heads: its share of the attention FLOPs.
  std::int64_t attention_pairs() const;

 private:
  // The initial values of init() into host (all zeros on entry), in parameter order.
  void draw_init(std::uint64_t seed, std::vector<T>& host) const;
  struct Block {
    ParamId input_norm, post_norm;
    std::unique_ptr<Mixer<T, Dev>> mixer;
    std::unique_ptr<Mlp<T, Dev>> mlp;
    bool moe = false;
  };
  // The residual stream of one layer: its input, between mixer and MLP, and the normed
  // inputs of mixer and MLP, which their backward reads.
  struct LayerActs {
    Buffer<Dev, T> x_mid, h1, h2;
  };
  void layer_forward(std::size_t l, const CpContext& cp, int B, const T* x_in, LayerActs& a,
                     T* x_out);
  void layer_backward(std::size_t l, const CpContext& cp, const T* x_in, const LayerActs& a, T* dx);
  // The fused LM head and cross-entropy over blocks of tokens: returns the summed token
  // losses; dh gets d(loss * grad_scale)/d(final norm output); the head's gradient adds up.
  double lm_head_loss(const T* hf, const std::int32_t* targets, std::int64_t N, double grad_scale,
                      T* dh);
  double router_loss(Communicator& batch, std::vector<double>& sums, bool train);

  ModelConfig c_;
  ModelOptions options_;
  ParamStore<T, Dev> params_;
  ParamId embed_ = 0, final_norm_ = 0, lm_head_ = 0;  // lm_head_ == embed_ when tied
  std::vector<Block> blocks_;
};

}  // namespace gdn
