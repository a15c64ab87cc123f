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

template <typename T, typename Dev>
class Model {
 public:
  Model(const ModelConfig& c, int chunk_size);

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
  struct Block {
    ParamId input_norm, post_norm;
    std::unique_ptr<Mixer<T, Dev>> mixer;
    std::unique_ptr<Mlp<T, Dev>> mlp;
    bool moe = false;
  };
  double router_loss(Communicator& batch, std::int64_t N, bool train);

  ModelConfig c_;
  ParamStore<T, Dev> params_;
  ParamId embed_ = 0, final_norm_ = 0, lm_head_ = 0;  // lm_head_ == embed_ when tied
  std::vector<Block> blocks_;
};

}  // namespace gdn
