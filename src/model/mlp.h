// The channel mixer of a layer (docs/design.md §6): per token, so it never
// crosses ranks. Dense SwiGLU (dense_mlp.h) or a sparse mixture of experts (moe_mlp.h),
// made by make_mlp, the one registration point. Pointers live in Dev's memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/lifecycle.h"
#include "core/precision.h"
#include "core/profile.h"
#include "core/rng.h"
#include "model/memory_estimate.h"
#include "model/model_config.h"
#include "model/params.h"

namespace gdn {

class Communicator;

// Expert parallelism: the experts of every MoE block split over `ep` ranks; this rank
// holds block `rank` of them (experts [rank E / ep, (rank + 1) E / ep)).
struct ExpertSplit {
  int ep = 1, rank = 0;
};

// As Mixer, the public calls check the call order (core/lifecycle.h) and hand over to
// the do_* members. An MLP keeps nothing across a release: Keep::replay frees everything.
template <typename T, typename Dev>
class Mlp {
 public:
  // name: the block's parameter prefix ("model.layers.3.mlp"), for messages.
  explicit Mlp(std::string name) : lifecycle_(std::move(name)) {}
  virtual ~Mlp() = default;
  // As Mixer::init.
  // The layer kind the profile charges this block's time to ("mlp", "moe"): a literal.
  virtual const char* kind() const = 0;
  virtual void init(Rng& rng, double std, const HostParams<T>& host) const = 0;
  // x [N, d] -> y [N, d]; x must stay valid until backward.
  void forward(std::int64_t N, const T* x, T* y) {
    lifecycle_.forward();
    const profile::Region region(kind());
    do_forward(N, x, y);
  }
  // dy [N, d] -> dx [N, d] (overwritten); parameter gradients accumulate.
  void backward(const T* dy, T* dx) {
    lifecycle_.backward();
    const profile::Region region(kind());
    do_backward(dy, dx);
  }
  // As Mixer::rebind_input.
  virtual void rebind_input(const T* x) = 0;
  // Frees everything forward kept for backward (activation recomputation: the model runs
  // forward again before backward). The router loss gradient of set_router_loss_grad stays.
  void release(Keep keep) {
    do_release();
    lifecycle_.release(keep);
  }

  // A MoE block's router (none for a dense MLP). The load-balancing loss of transformers'
  // load_balancing_loss_func sums, over the MoE layers and every token of the global
  // batch, the top-k assignments and the router probabilities per expert: the model adds
  // each layer's sums over this rank's tokens (add_router_stats, after forward), reduces
  // them over the ranks, and hands back d(loss)/d(probability of expert e), the same for
  // every token, before backward (set_router_loss_grad; null: the loss is not trained).
  virtual int num_experts() const { return 0; }
  virtual void add_router_stats(double* /*assigned*/, double* /*prob_sum*/) const {}
  virtual void set_router_loss_grad(const double* /*dprob*/) {}
  // With ep > 1, the ranks of this rank's ep group, which exchange the routed tokens:
  // `rows` moves Dev's buffers, `counts` host ones (the same ranks).
  virtual void set_expert_comm(Communicator* /*rows*/, Communicator* /*counts*/) {}

 protected:
  virtual void do_forward(std::int64_t N, const T* x, T* y) = 0;
  virtual void do_backward(const T* dy, T* dx) = 0;
  virtual void do_release() = 0;

 private:
  Lifecycle lifecycle_;
};

// The activations the MLP of layer `layer` holds for N tokens (memory_estimate.h), its
// experts spread over ep ranks (a balanced router: each rank runs N k routed rows).
ActivationElems mlp_activations(const ModelConfig& c, int layer, std::int64_t N, int ep = 1);

// The MLP of layer `layer` (MoE where c.is_moe_layer says so); its parameters are added
// to ps under prefix + "mlp.".
template <typename T, typename Dev>
std::unique_ptr<Mlp<T, Dev>> make_mlp(ParamStore<T, Dev>& ps, const std::string& prefix,
                                      const ModelConfig& c, int layer, ExpertSplit split,
                                      Precision precision);

}  // namespace gdn
