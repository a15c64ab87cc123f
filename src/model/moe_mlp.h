// The sparse mixture-of-experts block of Qwen3-Next and Qwen3.5-MoE, forward and backward:
// the math, the fused expert layout and the routing: docs/design.md §5c.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/dense_mlp.h"
#include "model/mlp.h"
#include "ops/convert/kept.h"

namespace gdn {

template <typename T, typename Dev>
class MoeMlp final : public Mlp<T, Dev> {
 public:
  // Registers gate, experts.gate_up_proj [E, 2I, d] (gate rows first),
  // experts.down_proj [E, d, I], shared_expert.* and shared_expert_gate under
  // prefix + "mlp."; the experts in a unit of their own. With split.ep > 1 this rank holds
  // E / ep experts (rows [split.rank E / ep, ...) of the two expert tensors) and the
  // routed tokens go to the rank of their expert and back by all-to-all (design §5c).
  MoeMlp(ParamStore<T, Dev>& ps, const std::string& prefix, const ModelConfig& c,
         ExpertSplit split = {}, Precision precision = Precision::plain);

  // transformers' _init_weights: every weight N(0, std).
  void init(Rng& rng, double std, const HostParams<T>& host) const override;
  const char* kind() const override { return "moe"; }
  void rebind_input(const T* x) override {
    x_ = x;
    shared_.rebind_input(x);
  }
  static ActivationElems activations(const ModelConfig& c, std::int64_t N, int ep = 1);

  int num_experts() const override { return E_; }
  // assigned, prob_sum and dprob are host arrays of E numbers (the model's reductions).
  void add_router_stats(double* assigned, double* prob_sum) const override;
  void set_router_loss_grad(const double* dprob) override;
  void set_expert_comm(Communicator* rows, Communicator* counts) override;

 protected:
  void do_forward(std::int64_t N, const T* x, T* y) override;
  void do_backward(const T* dy, T* dx) override;
  void do_release() override;

 private:
  // The expert-parallel forward and backward (ep > 1): the routed rows to the experts'
  // ranks and back. offset: offsets_ on the host.
  void forward_ep(const Buffer<Dev, T>& xs, const std::vector<std::int64_t>& offset, T* y);
  void backward_ep(const T* dy, T* dx, T* dw_routed);
  // The experts' forward and backward over rows grouped by expert (moe_mlp.cpp).
  void run_experts(const T* xe, const std::int64_t* offsets, int E, std::int64_t n);
  // dye (consumed: freed once the down projection's backward has read it) and the rows'
  // inputs, which gather_x writes into n x d scratch only when they are needed: the
  // largest buffers of a layer's backward are not all held at once. Returns dxe.
  Buffer<Dev, T> experts_backward(Buffer<Dev, T> dye, const std::function<void(T*)>& gather_x,
                                  const std::int64_t* offsets, int E, std::int64_t n);
  // Rows [R, d] in a source-major layout, out to the peers by all-to-all (to_experts:
  // send_rows_ out, recv_rows_ in; else the reverse).
  void exchange_rows(const T* send, T* recv, bool to_experts, const char* site);
  // Local expert j (0-based) of this rank.
  const T* gate_w(int e) const {
    return ps_.value(experts_gate_up_) + std::int64_t(e) * 2 * I_ * d_;
  }
  const T* up_w(int e) const { return gate_w(e) + std::int64_t(I_) * d_; }
  const T* down_w(int e) const { return ps_.value(experts_down_) + std::int64_t(e) * d_ * I_; }

  ParamStore<T, Dev>& ps_;
  // Precision::bf16: the layer's matmuls on bf16 operands, its activations kept in bf16
  // (core/precision.h).
  Precision precision_;
  int d_, E_, k_, I_;
  int ep_ = 1, El_ = 0, e0_ = 0;  // ep ranks; this rank's experts [e0_, e0_ + El_)
  Communicator* rows_comm_ = nullptr;
  Communicator* counts_comm_ = nullptr;
  bool renorm_;
  ParamId router_, experts_gate_up_, experts_down_, shared_gate_;
  DenseMlp<T, Dev> shared_;

  // The last forward. Routed rows are grouped by expert (ops::moe_route): expert e holds
  // the positions [offsets_[e], offsets_[e + 1]) of rows_ (token index) and choice_ (the
  // token's entry n k + j of idx_ and weights_: its top-k position j); slot_[n k + j] is
  // the position of entry n k + j. All in Dev's memory: ep = 1 never reads them on the host.
  std::int64_t N_ = 0;
  const T* x_ = nullptr;
  Buffer<Dev, T> probs_, weights_, shared_z_;
  Kept<T, Dev> shared_out_;
  Buffer<Dev, std::int32_t> idx_;
  Buffer<Dev, std::int64_t> offsets_, rows_, choice_, slot_;
  Buffer<Dev, T> routed_w_;         // per routed row
  Kept<T, Dev> g_, u_, act_, out_;  // per routed row (ep > 1: per received row)
  Buffer<Dev, double> dprob_;       // the load-balancing loss gradient
  // ep > 1: the routed rows this rank sends to and receives from each ep rank; the rows
  // received (source-major: by source rank, then by expert); their expert-major order
  // (local expert j's rows at [local_offset_[j], local_offset_[j + 1]) of perm_, which
  // indexes the received rows); the experts' outputs back in the order of rows_.
  std::vector<std::int64_t> send_rows_, recv_rows_, local_offset_;
  Kept<T, Dev> xr_, out_back_;
  Buffer<Dev, std::int64_t> perm_, local_offsets_;  // local_offsets_: local_offset_ on Dev
};

}  // namespace gdn
