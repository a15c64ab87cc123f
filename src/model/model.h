// The GDN language model (Qwen3-Next style, every mixer a Gated DeltaNet layer):
//
//   token embedding -> L x [ x += GDN(RMSNorm(x));  x += MLP(RMSNorm(x)) ]
//                   -> RMSNorm -> LM head (tied or not) -> cross-entropy
//
// with SwiGLU MLPs. Everything but the GDN layer is per token; under context
// parallelism each rank runs its shard and the GDN layers exchange the conv halo and the
// core's fixed-size pairs. Parameter names follow Hugging Face's Qwen3-Next.
//
// Backend (model/host_backend.h, or the CUDA build's CudaBackend) says where it runs. The
// ParamStore is always the host master copy of the values (init, checkpoints, the host
// optimizer); a device backend keeps its own copies of values and gradients, moved with
// upload_params / download_params / download_grads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/gdn_layer.h"
#include "model/params.h"
#include "train/config.h"

namespace gdn {

template <typename T, typename Backend = HostBackend<T>>
class GdnModel {
 public:
  using Vector = typename Backend::Vector;

  GdnModel(const ModelConfig& c, int chunk_size, Backend backend = Backend());

  ParamStore<T>& params() { return params_; }
  const ParamStore<T>& params() const { return params_; }
  const ModelConfig& config() const { return c_; }
  Backend& backend() { return be_; }

  // Host master values -> the backend's copy (after init, a resume, a host optimizer step),
  // and back (before a checkpoint); the backend's gradients -> the ParamStore's. No-ops on
  // the host backend.
  void upload_params() { be_.upload_params(params_); }
  void download_params() { be_.download_params(params_); }
  void download_grads() { be_.download_grads(params_); }
  // Zeroes the gradients where forward_backward accumulates them.
  void zero_grad() { be_.zero_grads(params_); }

  // Qwen3-Next initialisation from one seed, in parameter order: identical on every rank
  // and for every dp x cp layout. Uploads the values to a device backend.
  void init(std::uint64_t seed);

  // One shard: tokens and targets [B, Tl] (positions [t0, t0 + Tl) of B sequences of
  // T_global tokens). Runs the forward and the backward, accumulating parameter
  // gradients of (sum of this shard's token losses) * grad_scale; returns that sum
  // (unscaled, in double). Collective over cp (every rank of the group must call).
  // tokens and targets live in the backend's memory (device pointers on the GPU).
  double forward_backward(Communicator& cp, const std::int32_t* tokens, const std::int32_t* targets,
                          int B, std::int64_t Tl, std::int64_t T_global, double grad_scale);

 private:
  struct Block {
    Param<T>& input_norm;
    std::unique_ptr<GdnLayer<T, Backend>> mixer;
    Param<T>& post_norm;
    Param<T>&gate_proj, &up_proj, &down_proj;
  };

  ModelConfig c_;
  Backend be_;
  ParamStore<T> params_;
  Param<T>* embed_ = nullptr;
  std::vector<Block> blocks_;
  Param<T>* final_norm_ = nullptr;
  Param<T>* lm_head_ = nullptr;  // the embedding when tied
};

}  // namespace gdn
