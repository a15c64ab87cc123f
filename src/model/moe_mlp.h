// The sparse mixture-of-experts block of Qwen3-Next (Qwen3NextSparseMoeBlock) and
// Qwen3.5-MoE (Qwen3_5MoeSparseMoeBlock), forward and backward:
//
//   p = softmax(x gate^T) over E experts;  the top k experts of each token, their
//   probabilities renormalised to sum 1 (norm_topk_prob; Qwen3.5-MoE always)
//   y = sum over the chosen e of w_e * down_e( silu(gate_e(x)) * up_e(x) )
//     + sigmoid(x shared_expert_gate^T) * shared_expert(x)
//
// Experts are stored fused as transformers' modelling code holds them: gate_up_proj
// [E, 2I, d] (gate rows first) and down_proj [E, d, I]. Each expert runs as GEMMs on the
// rows routed to it, in expert order, so the result does not depend on the thread count.
// Every rank holds every expert (no expert parallelism yet). On either device: the token
// to expert grouping is made on the host from the router's choices (N k numbers copied
// back), and its row lists go to Dev for the gathers and scatters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/dense_mlp.h"
#include "model/mlp.h"

namespace gdn {

template <typename T, typename Dev>
class MoeMlp final : public Mlp<T, Dev> {
 public:
  // Registers gate, experts.gate_up_proj, experts.down_proj, shared_expert.* and
  // shared_expert_gate under prefix + "mlp.".
  MoeMlp(ParamStore<T, Dev>& ps, const std::string& prefix, const ModelConfig& c);

  // transformers' _init_weights: every weight N(0, std).
  void init(Rng& rng, double std, std::vector<T>& host) const override;
  static ActivationElems activations(const ModelConfig& c, std::int64_t N);

  int num_experts() const override { return E_; }
  // assigned, prob_sum and dprob are host arrays of E numbers (the model's reductions).
  void add_router_stats(double* assigned, double* prob_sum) const override;
  void set_router_loss_grad(const double* dprob) override;

 protected:
  void do_forward(std::int64_t N, const T* x, T* y) override;
  void do_backward(const T* dy, T* dx) override;
  void do_release() override;

 private:
  const T* gate_w(int e) const {
    return ps_.value(experts_gate_up_) + std::int64_t(e) * 2 * I_ * d_;
  }
  const T* up_w(int e) const { return gate_w(e) + std::int64_t(I_) * d_; }
  const T* down_w(int e) const { return ps_.value(experts_down_) + std::int64_t(e) * d_ * I_; }

  ParamStore<T, Dev>& ps_;
  int d_, E_, k_, I_;
  bool renorm_;
  ParamId router_, experts_gate_up_, experts_down_, shared_gate_;
  DenseMlp<T, Dev> shared_;

  // The last forward. Routed rows are grouped by expert: expert e holds the slots
  // [offset_[e], offset_[e + 1]) (on the host) of rows_ (token index) and choice_ (the
  // token's entry n k + j of idx_ and weights_: its top-k position j), both in Dev's memory.
  std::int64_t N_ = 0;
  const T* x_ = nullptr;
  Buffer<Dev, T> probs_, weights_, shared_out_, shared_z_;
  Buffer<Dev, std::int32_t> idx_;
  std::vector<std::int64_t> offset_;
  Buffer<Dev, std::int64_t> rows_, choice_;
  Buffer<Dev, T> routed_w_, g_, u_, act_, out_;  // per routed row
  Buffer<Dev, double> dprob_;                    // the load-balancing loss gradient
};

}  // namespace gdn
