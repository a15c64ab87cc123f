// The language model (Qwen3-Next layout, docs/design.md §6):
//
//   token embedding -> L x [ x += mixer(RMSNorm(x));  x += mlp(RMSNorm(x)) ]
//                   -> RMSNorm -> LM head (tied or not) -> cross-entropy
//
// Each layer's mixer and MLP come from the config (make_mixer, make_mlp). Everything but
// the mixers is per token; under context parallelism each rank runs its shard and the
// mixers exchange what they need through the CpContext. Parameter names follow Hugging
// Face's Qwen3-Next; the parameters and gradients are two flat buffers in Dev's memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

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

  // One shard: tokens and targets [B, Tl] (positions cp.shard of B sequences of
  // cp.T_global tokens), in Dev's memory. Runs the forward and the backward,
  // accumulating parameter gradients of (sum of this shard's token losses) * grad_scale;
  // returns that sum (unscaled, in double). Collective over cp.comm.
  double forward_backward(const CpContext& cp, const std::int32_t* tokens,
                          const std::int32_t* targets, int B, double grad_scale);

 private:
  struct Block {
    ParamId input_norm, post_norm;
    std::unique_ptr<Mixer<T, Dev>> mixer;
    std::unique_ptr<Mlp<T, Dev>> mlp;
  };

  ModelConfig c_;
  ParamStore<T, Dev> params_;
  ParamId embed_ = 0, final_norm_ = 0, lm_head_ = 0;  // lm_head_ == embed_ when tied
  std::vector<Block> blocks_;
};

}  // namespace gdn
