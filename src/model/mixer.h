// The token mixer of a layer (docs/design.md §6): the only part of a block that
// talks across the sequence, and so across context-parallel ranks. One implementation
// per LayerType (gdn_mixer.h, attention_mixer.h), made by make_mixer, the one
// registration point. Pointers live in Dev's memory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/lifecycle.h"
#include "core/precision.h"
#include "core/profile.h"
#include "core/rng.h"
#include "cp/cp_context.h"
#include "model/memory_estimate.h"
#include "model/model_config.h"
#include "model/params.h"

namespace gdn {

// The public calls check the layer's call order (core/lifecycle.h, docs/design.md §6c)
// and hand over to the implementation's do_* members.
template <typename T, typename Dev>
class Mixer {
 public:
  // name: the layer's parameter prefix ("model.layers.3.linear_attn"), for messages.
  explicit Mixer(std::string name) : lifecycle_(std::move(name)) {}
  virtual ~Mixer() = default;
  // Writes this mixer's initial parameter values into `host` (a host copy of its unit, or
  // of every parameter), drawing from rng in parameter order.
  virtual void init(Rng& rng, double std, const HostParams<T>& host) const = 0;
  // x [B, Tl, d] -> y [B, Tl, d] on this rank's shard (Tl = cp.tokens() tokens of B
  // sequences). Keeps what backward needs; x must stay valid until then. After
  // release(Keep::replay) it is a recomputation of the last forward (same cp, same x).
  void forward(const CpContext& cp, int B, const T* x, T* y) {
    const profile::Region region(kind());
    do_forward(cp, B, x, y, lifecycle_.forward());
  }
  // dy [B, Tl, d] -> dx [B, Tl, d] (overwritten); parameter gradients accumulate. Only
  // on the activations of a forward.
  void backward(const CpContext& cp, const T* dy, T* dx) {
    lifecycle_.backward();
    const profile::Region region(kind());
    do_backward(cp, dy, dx);
  }
  // Frees what forward kept for backward (activation recomputation). With Keep::replay a
  // mixer may keep the small results it got from other ranks and take them from there
  // in the recomputing forward instead of exchanging again.
  void release(Keep keep) {
    do_release(keep);
    lifecycle_.release(keep);
  }
  // The last forward's input x now lives at `x` (the same values: the model's decoded copy
  // of an input it kept in bf16); backward reads it there.
  virtual void rebind_input(const T* x) = 0;
  // Softmax attention only: the (query, key) pairs of the last forward, summed over heads,
  // per sequence (this rank's share of the causal triangle; 0 for other mixers).
  virtual std::int64_t attention_pairs() const { return 0; }
  // The layer kind the profile charges this mixer's time to ("gdn", "attention"): a literal.
  virtual const char* kind() const = 0;

 protected:
  // replay: this forward recomputes the last one, whatever do_release(Keep::replay) kept.
  virtual void do_forward(const CpContext& cp, int B, const T* x, T* y, bool replay) = 0;
  virtual void do_backward(const CpContext& cp, const T* dy, T* dx) = 0;
  virtual void do_release(Keep keep) = 0;

 private:
  Lifecycle lifecycle_;
};

// The mixer of one layer; its parameters are added to ps under prefix
// ("model.layers.3.") and the Hugging Face name of its kind ("linear_attn.").
// The activations a layer of this type holds on a shard (memory_estimate.h).
ActivationElems mixer_activations(LayerType type, const ModelConfig& c, const ShardShape& s);

template <typename T, typename Dev>
std::unique_ptr<Mixer<T, Dev>> make_mixer(LayerType type, ParamStore<T, Dev>& ps,
                                          const std::string& prefix, const ModelConfig& c,
                                          int chunk_size, Precision precision);

}  // namespace gdn
