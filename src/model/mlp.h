// The channel mixer of a layer (docs/design.md §6): per token, so it never
// crosses ranks. Dense SwiGLU now (dense_mlp.h); a sparse mixture of experts next, made
// by make_mlp, the one registration point. Pointers live in Dev's memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "model/memory_estimate.h"
#include "model/model_config.h"
#include "model/params.h"

namespace gdn {

template <typename T, typename Dev>
class Mlp {
 public:
  virtual ~Mlp() = default;
  // As Mixer::init.
  virtual void init(Rng& rng, double std, std::vector<T>& host) const = 0;
  // x [N, d] -> y [N, d]; x must stay valid until backward.
  virtual void forward(std::int64_t N, const T* x, T* y) = 0;
  // dy [N, d] -> dx [N, d] (overwritten); parameter gradients accumulate.
  virtual void backward(const T* dy, T* dx) = 0;
};

// The activations the MLP of layer `layer` holds for N tokens (memory_estimate.h).
ActivationElems mlp_activations(const ModelConfig& c, int layer, std::int64_t N);

// The MLP of layer `layer`; its parameters are added to ps under prefix + "mlp.".
template <typename T, typename Dev>
std::unique_ptr<Mlp<T, Dev>> make_mlp(ParamStore<T, Dev>& ps, const std::string& prefix,
                                      const ModelConfig& c, int layer);

}  // namespace gdn
