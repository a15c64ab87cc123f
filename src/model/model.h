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

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "cp/cp_context.h"
#include "model/mixer.h"
#include "model/mlp.h"
#include "model/model_comms.h"
#include "model/model_config.h"
#include "model/params.h"
#include "ops/convert/kept.h"

namespace gdn {

// How forward_backward trades memory for time (docs/design.md §6b).
struct ModelOptions {
  // Activation recomputation: keep only each layer's input from the forward and run the
  // layer's forward again just before its backward. Losses and gradients are bit-identical.
  bool recompute = false;
  // Tokens per block of the fused LM head and cross-entropy: the [tokens x vocab] logits
  // exist one block at a time. 0: the default of loss_block_tokens below.
  std::int64_t loss_block_tokens = 0;
  // train.shard full: the parameters are stored by unit (params.h), and resident only
  // between a UnitGather's acquire and release.
  bool by_unit = false;
  // Expert parallelism: this rank's block of every MoE layer's experts.
  ExpertSplit experts = {};
  // bf16 mixed precision (train.dtype bf16): every layer is made in Precision::bf16
  // (core/precision.h). The parameters, gradients and residual stream stay T.
  bool bf16 = false;
};

// Under train.shard full a rank holds 1/world of every unit; the model says when it needs
// a unit whole and when it is done with it (train/sharded_state.h implements this with
// an all-gather and a reduce-scatter). Units: 0 the embedding, then each layer's (one,
// or three for a MoE layer: the layer, its experts, its shared expert), and last the final
// norm with the LM head (unit 0 again for a tied head).
class UnitGather {
 public:
  virtual ~UnitGather() = default;
  // Before unit u is used: its gradients resident and zero, and, when `values`, its values.
  virtual void acquire(std::size_t u, bool values) = 0;
  // After its last use in a pass: with `grads`, the gradients it holds are complete for
  // this pass and are to be reduced; then it may be freed.
  virtual void release(std::size_t u, bool grads) = 0;
};
// The default block of the fused LM head and cross-entropy: kLossBlockElems logits, but
// at least kLossBlockMinTokens tokens. Each block reads the head's weight W [V, d] twice
// (logits, dh) and reads and writes its gradient once (dW += dlogits^T h): 4 V d elements
// per 6 n V d flops, so small blocks make those passes the cost (vocab 151936: 2^24
// logits are 110 tokens, 38 passes over W and dW for 4096 tokens; 512 tokens, 8 passes).
inline constexpr std::int64_t kLossBlockElems = std::int64_t(1) << 24;
inline constexpr std::int64_t kLossBlockMinTokens = 512;
// Tokens per block for N tokens at vocab V: `requested` (ModelOptions::loss_block_tokens)
// if positive, else the default above; never more than N (and at least 1).
inline std::int64_t loss_block_tokens(std::int64_t requested, std::int64_t V, std::int64_t N) {
  const std::int64_t block =
      requested > 0 ? requested
                    : std::max(kLossBlockMinTokens, kLossBlockElems / std::max<std::int64_t>(V, 1));
  return std::min(block, std::max<std::int64_t>(N, 1));
}

// The parameters a model of this config has (without allocating them), its units and
// its parameters (with one rank's block of experts when split.ep > 1).
std::int64_t parameter_count(const ModelConfig& c);
std::vector<ParamUnit> parameter_units(const ModelConfig& c, ExpertSplit split = {});
std::vector<ParamInfo> parameter_infos(const ModelConfig& c, ExpertSplit split = {});

template <typename T, typename Dev>
class Model {
 public:
  Model(const ModelConfig& c, int chunk_size, ModelOptions options = {});

  ParamStore<T, Dev>& params() { return params_; }
  const ParamStore<T, Dev>& params() const { return params_; }
  const ModelConfig& config() const { return c_; }

  // Qwen3-Next initialisation from one seed, in parameter order: identical on every rank
  // and for every dp x cp layout. Needs the flat storage.
  void init(std::uint64_t seed);
  // The same values one unit at a time, in unit order: `take` gets unit u's host values
  // (the size() elements of ParamUnit u of params().units()), for a store by unit.
  void draw_init_by_unit(std::uint64_t seed,
                         const std::function<void(std::size_t, const T*)>& take) const;
  // Null (the default): every parameter is resident.
  void set_unit_gather(UnitGather* g) { gather_ = g; }
  std::size_t head_unit() const { return params_.units().size() - 1; }
  // The communicators of every layer (model_comms.h), set once before the first step;
  // they must outlive the model's steps.
  void set_comms(const ModelComms& comms);

  struct Losses {
    double ce_sum = 0;  // this shard's summed token cross-entropies (unscaled)
    // transformers' load_balancing_loss_func over the global batch (the same on every
    // rank; 0 without MoE layers). Its gradient is trained when output_router_logits.
    double aux = 0;
  };
  // One shard: tokens and targets [B, Tl] (positions s.shard of B rows of s.T_global
  // tokens), in Dev's memory. Runs the forward and the backward, accumulating the
  // parameter gradients of ce_sum * grad_scale (+ router_aux_loss_coef * aux when
  // output_router_logits, times aux_scale: a micro-batch's share of the step's; each rank
  // adds its tokens' part, so the gradients summed over the batch group are the whole
  // batch's). Collective over the communicators of set_comms, which must have been called.
  Losses forward_backward(const StepShard& s, const std::int32_t* tokens,
                          const std::int32_t* targets, int B, double grad_scale,
                          double aux_scale = 1.0);

  // The forward alone (validation): this shard's summed token cross-entropies, nothing kept
  // for a backward (each layer's activations freed as the next one runs) and no gradient
  // touched. Collective as forward_backward.
  double forward_loss(const StepShard& s, const std::int32_t* tokens, const std::int32_t* targets,
                      int B);

  // The (query, key) pairs of the attention layers' last forward on this rank, summed over
  // the batch rows, layers and heads: its share of the attention FLOPs.
  std::int64_t attention_pairs() const;

 private:
  // Draws the initial values of draw group g into host (all zeros on entry), continuing
  // rng. The groups: 0 the embedding, 1 + l layer l (all its units), L + 1 the head.
  void draw_group(std::size_t g, Rng& rng, const HostParams<T>& host) const;
  // Draw group g's units [first, last).
  std::pair<std::size_t, std::size_t> group_units(std::size_t g) const;
  void acquire(std::size_t u, bool values = true) {
    if (gather_) gather_->acquire(u, values);
  }
  void release(std::size_t u, bool grads) {
    if (gather_) gather_->release(u, grads);
  }
  void acquire_layer(std::size_t l) {
    for (std::size_t u = blocks_[l].unit_begin; u < blocks_[l].unit_end; ++u) acquire(u);
  }
  void release_layer(std::size_t l, bool grads) {
    for (std::size_t u = blocks_[l].unit_begin; u < blocks_[l].unit_end; ++u) release(u, grads);
  }
  struct Block {
    std::size_t unit_begin = 0, unit_end = 0;  // its units
    ParamId input_norm, post_norm;
    std::unique_ptr<Mixer<T, Dev>> mixer;
    std::unique_ptr<Mlp<T, Dev>> mlp;
    bool moe = false;
  };
  // What a layer keeps of the residual stream: x_mid, between mixer and MLP, and the
  // normed inputs of mixer and MLP, h1 and h2. In the bf16 mode all three are kept in bf16
  // once the layer's forward is done (ops/convert/kept.h): the forward sums in float, and only
  // the backward's norms and weight gradients read the rounded copies.
  struct LayerActs {
    Kept<T, Dev> x_mid, h1, h2;
  };
  void layer_forward(std::size_t l, const CpContext& cp, int B, const T* x_in, LayerActs& a,
                     T* x_out);
  // x_in: the layer's input, read (in the bf16 mode as kept: rounded) and then freed.
  void layer_backward(std::size_t l, const CpContext& cp, Kept<T, Dev>& x_in, LayerActs& a, T* dx);
  // The fused LM head and cross-entropy over blocks of tokens: returns the summed token
  // losses; dh gets d(loss * grad_scale)/d(final norm output); the head's gradient adds up.
  // An invalid target throws after the last block, naming its row of `targets`.
  double lm_head_loss(const T* hf, const std::int32_t* targets, std::int64_t N, double grad_scale,
                      T* dh);
  double router_loss(std::vector<double>& sums, bool train, double scale);

  ModelConfig c_;
  ModelOptions options_;
  Precision precision_;  // of options_.bf16: the lm head's and the residual stream's
  ParamStore<T, Dev> params_;
  ParamId embed_ = 0, final_norm_ = 0, lm_head_ = 0;  // lm_head_ == embed_ when tied
  std::vector<Block> blocks_;
  UnitGather* gather_ = nullptr;
  ModelComms comms_;
};

}  // namespace gdn
