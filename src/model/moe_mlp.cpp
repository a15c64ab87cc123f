#include "model/moe_mlp.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "comm/call_sites.h"
#include "comm/communicator.h"
#include "core/error.h"
#include "ops/elementwise/elementwise.h"
#include "ops/grouped_linear/grouped_linear.h"
#include "ops/linear/linear.h"
#include "ops/moe/moe.h"
#include "ops/moe_route/moe_route.h"
#include "ops/swiglu/swiglu.h"
#include "runtime/devices.h"

namespace gdn {

namespace {

// Rows of the routed or shared outputs a backward decodes at a time (Kept::for_blocks).
constexpr std::int64_t kRowBlock = 4096;

}  // namespace

template <typename T, typename Dev>
MoeMlp<T, Dev>::MoeMlp(ParamStore<T, Dev>& ps, const std::string& prefix, const ModelConfig& c,
                       ExpertSplit split, Precision precision)
    : Mlp<T, Dev>(prefix + "mlp"),
      ps_(ps),
      precision_(precision),
      d_(c.hidden_size),
      E_(c.num_experts),
      k_(c.num_experts_per_tok),
      I_(c.moe_intermediate_size),
      ep_(split.ep),
      El_(split.ep >= 1 && E_ % split.ep == 0 ? E_ / split.ep : 0),
      e0_(split.rank * El_),
      renorm_(c.family == ModelFamily::qwen3_5_moe || c.norm_topk_prob),
      router_(ps.add(prefix + "mlp.gate.weight", {E_, d_}, true)),
      experts_gate_up_((ps.begin_unit(prefix + "mlp.experts", true),
                        ps.add(prefix + "mlp.experts.gate_up_proj", {El_, 2 * I_, d_}, true))),
      experts_down_(ps.add(prefix + "mlp.experts.down_proj", {El_, d_, I_}, true)),
      shared_gate_((ps.begin_unit(prefix + "mlp.shared_expert"),
                    ps.add(prefix + "mlp.shared_expert_gate.weight", {1, d_}, true))),
      shared_(ps, prefix + "mlp.shared_expert.", c.hidden_size, c.shared_expert_intermediate_size,
              precision) {
  GDN_CHECK(El_ > 0 && split.rank >= 0 && split.rank < split.ep, "moe: ep ", split.ep, " (rank ",
            split.rank, ") does not divide the ", E_, " experts of ", prefix, "mlp");
}

template <typename T, typename Dev>
void MoeMlp<T, Dev>::init(Rng& rng, double std, const HostParams<T>& host) const {
  // The draws run over every expert: a block of them is drawn through the ep = 1 model.
  GDN_CHECK(ep_ == 1, "moe: the initial values of an expert block (ep ", ep_,
            ") are drawn through the whole model (Model::init)");
  for (ParamId id : {router_, experts_gate_up_, experts_down_, shared_gate_}) {
    T* w = host.at(ps_.info(id));
    for (std::int64_t i = 0; i < ps_.info(id).size; ++i) w[i] = T(std * rng.normal());
  }
  shared_.init(rng, std, host);
}

template <typename T, typename Dev>
ActivationElems MoeMlp<T, Dev>::activations(const ModelConfig& c, std::int64_t N, int ep) {
  const std::int64_t E = c.num_experts, k = c.num_experts_per_tok, I = c.moe_intermediate_size;
  const std::int64_t d = c.hidden_size, Nk = N * k;
  const ActivationElems shared =
      DenseMlp<T, Dev>::activations(c.hidden_size, c.shared_expert_intermediate_size, N);
  ActivationElems a;
  // probs, weights, idx; per routed row its weight, gate, up, act, out; shared out, z.
  // Gate, up, act, out and shared out are kept in bf16 in the bf16 mode (ops/convert/kept.h),
  // and the backward decodes gate and up (or out, or shared out) at a time.
  a.kept = N * E + 2 * Nk + Nk * (1 + 3 * I + d) + N * (d + 1) + shared.kept;
  a.kept_bf16 = Nk * (3 * I + d) + N * d + shared.kept_bf16;
  a.decoded = std::max({2 * Nk * I, Nk * d, N * d, shared.decoded});
  // ep > 1: the rows received for this rank's experts (in bf16 in the bf16 mode); their
  // outputs back take the place of out (freed once sent).
  if (ep > 1) {
    a.kept += Nk * d;
    a.kept_bf16 += Nk * d;
  }
  // Backward, per routed row: dy, dact for the down projection's backward, dact, dgate, dup
  // for SwiGLU's, then dgate, dup, x, dx for the gate and up projections'
  // (experts_backward); and dweights, dlogits, the shared expert's part.
  const std::int64_t experts = std::max({Nk * (d + I), Nk * 3 * I, Nk * (2 * d + 2 * I)});
  a.transient = std::max(experts + Nk + N * E + N * d, shared.transient);
  return a;
}

template <typename T, typename Dev>
void MoeMlp<T, Dev>::do_forward(std::int64_t N, const T* x, T* y) {
  const Dev dev{};
  N_ = N;
  x_ = x;
  // Router.
  Buffer<Dev, T> logits(N * E_);
  {
    // The routing decisions stay float (Precision::plain) in the bf16 mode.
    ops::linear_forward(dev, Precision::plain, x, ps_.value(router_), N, d_, E_, logits.data());
  }
  probs_.resize(N * E_);
  idx_.resize(N * k_);
  weights_.resize(N * k_);
  ops::router_forward(dev, logits.data(), N, E_, k_, renorm_, probs_.data(), idx_.data(),
                      weights_.data());
  // Group the routed (token, slot) pairs by expert, tokens in order, on the device.
  const std::int64_t R = N * k_;
  offsets_.resize(std::size_t(E_) + 1);
  rows_.resize(R);
  choice_.resize(R);
  slot_.resize(R);
  ops::moe_route(dev, idx_.data(), N, k_, E_, offsets_.data(), rows_.data(), choice_.data(),
                 slot_.data());
  routed_w_.resize(R);
  ops::gather_rows(dev, weights_.data(), choice_.data(), R, 1, routed_w_.data());
  // The shared expert and its gate write y; the experts add to it.
  shared_z_.resize(N);
  shared_.forward(N, x, shared_out_.open(N * d_, precision_));
  ops::linear_forward(dev, precision_, x, ps_.value(shared_gate_), N, d_, 1, shared_z_.data());
  Dev::fill(y, std::size_t(N * d_), T(0));
  ops::shared_gate_forward(dev, shared_out_.values(), shared_z_.data(), N, d_, y);
  shared_out_.seal();
  Buffer<Dev, T> xs(std::size_t(R * d_));
  ops::gather_rows(dev, x, rows_.data(), R, d_, xs.data());
  if (ep_ > 1) {
    // The all-to-all needs every expert's count on the host: the one download of the
    // routing, which ep = 1 does without.
    forward_ep(xs, to_host<Dev>(offsets_), y);
    return;
  }
  // Every expert at once: one grouped call per linear (no per-expert loop, no counts here).
  run_experts(xs.data(), offsets_.data(), E_, R);
  ops::moe_combine(dev, out_.values(), slot_.data(), routed_w_.data(), N, k_, d_, y);
  out_.seal();
}

// The experts' forward over n rows grouped by expert (expert j's at [offsets[j],
// offsets[j + 1]), in Dev's memory), xe their inputs: g_, u_, act_ kept (sealed) and out_
// written (the caller rounds and seals it). One grouped call per linear.
template <typename T, typename Dev>
void MoeMlp<T, Dev>::run_experts(const T* xe, const std::int64_t* offsets, int E, std::int64_t n) {
  const Dev dev{};
  const std::int64_t gu_stride = std::int64_t(2) * I_ * d_;
  ops::grouped_linear_forward(dev, precision_, xe, gate_w(0), gu_stride, offsets, E, n, d_, I_,
                              g_.open(n * I_, precision_));
  ops::grouped_linear_forward(dev, precision_, xe, up_w(0), gu_stride, offsets, E, n, d_, I_,
                              u_.open(n * I_, precision_));
  ops::swiglu_forward(dev, g_.values(), u_.values(), n * I_, act_.open(n * I_, precision_));
  g_.seal();  // each as soon as the forward is done with it: the float copies do not pile up
  u_.seal();
  ops::grouped_linear_forward(dev, precision_, act_.values(), down_w(0), std::int64_t(d_) * I_,
                              offsets, E, n, I_, d_, out_.open(n * d_, precision_));
  act_.seal();
}

template <typename T, typename Dev>
void MoeMlp<T, Dev>::set_expert_comm(Communicator* rows, Communicator* counts) {
  rows_comm_ = rows;
  counts_comm_ = counts;
}

template <typename T, typename Dev>
void MoeMlp<T, Dev>::exchange_rows(const T* send, T* recv, bool to_experts, const char* site) {
  const std::vector<std::int64_t>& out = to_experts ? send_rows_ : recv_rows_;
  const std::vector<std::int64_t>& in = to_experts ? recv_rows_ : send_rows_;
  const std::size_t row = std::size_t(d_) * sizeof(T);
  std::vector<std::size_t> sb(static_cast<std::size_t>(ep_)), so(sb.size()), rb(sb.size()),
      ro(sb.size());
  for (std::size_t q = 0, s_at = 0, r_at = 0; q < sb.size(); ++q) {
    sb[q] = std::size_t(out[q]) * row, so[q] = s_at, s_at += sb[q];
    rb[q] = std::size_t(in[q]) * row, ro[q] = r_at, r_at += rb[q];
  }
  rows_comm_->all_to_all(send, sb, so, recv, rb, ro, site);
}

// The routed rows xs [N k, d] (grouped by expert, so by the rank holding it) go to their
// experts' ranks; each rank runs its experts on what it received and sends the outputs
// back, which add to y with the routing weights as on one rank.
template <typename T, typename Dev>
void MoeMlp<T, Dev>::forward_ep(const Buffer<Dev, T>& xs, const std::vector<std::int64_t>& offset,
                                T* y) {
  const Dev dev{};
  GDN_CHECK(rows_comm_ && counts_comm_ && rows_comm_->size() == ep_ && counts_comm_->size() == ep_,
            "moe: ep ", ep_, " needs the ep group's communicators (set_expert_comm)");
  const std::int64_t R = N_ * k_;
  // Each expert's routed rows from here, to its rank; the counts of this rank's experts
  // from every rank of the group.
  std::vector<std::int64_t> sent(static_cast<std::size_t>(E_)), got(sent.size());
  for (int e = 0; e < E_; ++e)
    sent[std::size_t(e)] = offset[std::size_t(e) + 1] - offset[std::size_t(e)];
  const std::size_t block = std::size_t(El_) * sizeof(std::int64_t);
  std::vector<std::size_t> bytes(static_cast<std::size_t>(ep_), block), offsets(bytes.size());
  for (std::size_t q = 0; q < offsets.size(); ++q) offsets[q] = q * block;
  counts_comm_->all_to_all(sent.data(), bytes, offsets, got.data(), bytes, offsets,
                           model_sites::kExpertCounts);
  send_rows_.assign(std::size_t(ep_), 0);
  recv_rows_.assign(std::size_t(ep_), 0);
  for (int q = 0; q < ep_; ++q)
    for (int j = 0; j < El_; ++j) {
      send_rows_[std::size_t(q)] += sent[std::size_t(q * El_ + j)];
      recv_rows_[std::size_t(q)] += got[std::size_t(q * El_ + j)];
    }
  // The received rows are source-major (by rank, then expert); perm_ lists them
  // expert-major, so each local expert's rows are one range of it.
  std::vector<std::int64_t> src_at(static_cast<std::size_t>(ep_) + 1, 0);
  for (int s = 0; s < ep_; ++s)
    src_at[std::size_t(s) + 1] = src_at[std::size_t(s)] + recv_rows_[std::size_t(s)];
  std::vector<std::int64_t> perm;
  perm.reserve(std::size_t(src_at.back()));
  local_offset_.assign(std::size_t(El_) + 1, 0);
  std::vector<std::int64_t> cursor(src_at.begin(), src_at.end() - 1);
  for (int j = 0; j < El_; ++j) {
    for (int s = 0; s < ep_; ++s) {
      const std::int64_t n = got[std::size_t(s * El_ + j)];
      for (std::int64_t i = 0; i < n; ++i) perm.push_back(cursor[std::size_t(s)]++);
    }
    local_offset_[std::size_t(j) + 1] = std::int64_t(perm.size());
  }
  perm_ = to_device<Dev>(perm.data(), perm.size());
  local_offsets_ = to_device<Dev>(local_offset_.data(), local_offset_.size());
  const std::int64_t Rr = std::int64_t(perm.size());
  T* xr = xr_.open(Rr * d_, precision_);
  exchange_rows(xs.data(), xr, true, model_sites::kExpertTokens);
  // This rank's experts over the received rows in expert-major order, one grouped call each.
  Buffer<Dev, T> xe(std::size_t(Rr * d_));
  ops::gather_rows(dev, xr, perm_.data(), Rr, d_, xe.data());
  xr_.seal();  // the backward's gate and up projections read them (in bf16 in the bf16 mode)
  run_experts(xe.data(), local_offsets_.data(), El_, Rr);
  // The outputs back to source-major, then home, in the order of rows_ (out_back_ keeps
  // them for the backward; out_ is not needed there).
  Buffer<Dev, T> outs(std::size_t(Rr * d_));
  ops::scatter_add_rows(dev, out_.values(), perm_.data(), static_cast<const T*>(nullptr), Rr, d_,
                        outs.data());
  out_.clear();
  T* back = out_back_.open(R * d_, precision_);
  exchange_rows(outs.data(), back, false, model_sites::kExpertOutputs);
  // A token's k rows add in position order (moe_combine), as on one rank; rows_ repeats a
  // token k times, which scatter_add_rows does not allow.
  ops::moe_combine(dev, back, slot_.data(), routed_w_.data(), N_, k_, d_, y);
  out_back_.seal();  // kept as out_ is on one rank: in bf16 in the bf16 mode
}

// The mirror of forward_ep: dy of the routed rows, scaled by their weights, to the
// experts; the experts' dx back. dw_routed gets d(weight) of each routed row.
template <typename T, typename Dev>
void MoeMlp<T, Dev>::backward_ep(const T* dy, T* dx, T* dw_routed) {
  const Dev dev{};
  const std::int64_t R = N_ * k_, Rr = local_offset_.back();
  Buffer<Dev, T> dys(std::size_t(R * d_));
  ops::gather_rows(dev, dy, rows_.data(), R, d_, dys.data());
  ops::row_dots(dev, dys.data(), out_back_.view(), R, d_, dw_routed);
  out_back_.clear();
  ops::scale_rows(dev, dys.data(), routed_w_.data(), R, d_, dys.data());
  Buffer<Dev, T> dyr(std::size_t(Rr * d_)), dxr(std::size_t(Rr * d_));
  exchange_rows(dys.data(), dyr.data(), true, model_sites::kExpertDy);
  dys = Buffer<Dev, T>();
  {
    Buffer<Dev, T> dye(std::size_t(Rr * d_));
    ops::gather_rows(dev, dyr.data(), perm_.data(), Rr, d_, dye.data());
    auto gather_x = [&](T* xe) {
      ops::gather_rows(dev, xr_.view(), perm_.data(), Rr, d_, xe);
      xr_.clear();
    };
    const Buffer<Dev, T> dxe =
        experts_backward(std::move(dye), gather_x, local_offsets_.data(), El_, Rr);
    ops::scatter_add_rows(dev, dxe.data(), perm_.data(), static_cast<const T*>(nullptr), Rr, d_,
                          dxr.data());
  }
  Buffer<Dev, T> dxs(std::size_t(R * d_));
  exchange_rows(dxr.data(), dxs.data(), false, model_sites::kExpertDx);
  ops::moe_combine(dev, dxs.data(), slot_.data(), static_cast<const T*>(nullptr), N_, k_, d_, dx);
}

// The experts' backward over n rows grouped by expert (expert j's at [offsets[j],
// offsets[j + 1]), in Dev's memory), as g_, u_ and act_ are: dye their output gradients
// (scaled by the routing weights), gather_x writes their inputs. Returns their input
// gradients. One grouped call per linear, no per-expert loop. dye goes once the down
// projection's backward has read it, dgate and dup come after it, and the inputs only for
// the gate and up projections: at most dy, dact (or dact, dgate, dup) or dgate, dup, x, dx
// at once.
template <typename T, typename Dev>
Buffer<Dev, T> MoeMlp<T, Dev>::experts_backward(Buffer<Dev, T> dye,
                                                const std::function<void(T*)>& gather_x,
                                                const std::int64_t* offsets, int E,
                                                std::int64_t n) {
  const Dev dev{};
  const std::int64_t gu_stride = std::int64_t(2) * I_ * d_;
  T* dWgu = ps_.grad(experts_gate_up_);
  Buffer<Dev, T> dg, du;
  {
    Buffer<Dev, T> dact(std::size_t(n * I_));
    ops::grouped_linear_backward(dev, precision_, act_.view(), down_w(0), std::int64_t(d_) * I_,
                                 dye.data(), offsets, E, n, I_, d_, dact.data(),
                                 ps_.grad(experts_down_));
    act_.clear();
    dye = Buffer<Dev, T>();
    dg.resize(std::size_t(n * I_));
    du.resize(std::size_t(n * I_));
    ops::swiglu_backward(dev, g_.view(), u_.view(), dact.data(), n * I_, dg.data(), du.data());
    g_.clear();
    u_.clear();
  }
  Buffer<Dev, T> xe(std::size_t(n * d_)), dxe(std::size_t(n * d_));
  gather_x(xe.data());
  ops::grouped_linear_backward(dev, precision_, xe.data(), gate_w(0), gu_stride, dg.data(), offsets,
                               E, n, d_, I_, dxe.data(), dWgu);
  dg = Buffer<Dev, T>();
  // Added into dxe: the bits of dxe + (du W_up), as a sum of two buffers would give.
  ops::grouped_linear_backward(dev, precision_, xe.data(), up_w(0), gu_stride, du.data(), offsets,
                               E, n, d_, I_, dxe.data(), dWgu + std::int64_t(I_) * d_,
                               /*accumulate=*/true);
  return dxe;
}

template <typename T, typename Dev>
void MoeMlp<T, Dev>::add_router_stats(double* assigned, double* prob_sum) const {
  // Reduced on the device; the model's sums are host arrays, so the 2 E results come down.
  Buffer<Dev, double> stats(std::size_t(2) * E_);
  ops::router_stats(Dev{}, probs_.data(), offsets_.data(), N_, E_, stats.data());
  const std::vector<double> s = to_host<Dev>(stats);
  for (int e = 0; e < E_; ++e) {
    assigned[e] += s[std::size_t(e)];
    prob_sum[e] += s[std::size_t(E_ + e)];
  }
}

template <typename T, typename Dev>
void MoeMlp<T, Dev>::set_router_loss_grad(const double* dprob) {
  dprob_ = dprob ? to_device<Dev>(dprob, std::size_t(E_)) : Buffer<Dev, double>();
}

template <typename T, typename Dev>
void MoeMlp<T, Dev>::do_backward(const T* dy, T* dx) {
  const Dev dev{};
  const std::int64_t N = N_;
  Dev::fill(dx, std::size_t(N * d_), T(0));
  Buffer<Dev, T> dweights(N * k_), dw_routed(N * k_);
  if (ep_ > 1) {
    backward_ep(dy, dx, dw_routed.data());
  } else {
    const std::int64_t R = N * k_;
    Buffer<Dev, T> dys(std::size_t(R * d_));
    ops::gather_rows(dev, dy, rows_.data(), R, d_, dys.data());
    // d(weight) = <dy, expert output>, a block of rows at a time; then the experts see dy
    // scaled by their weights.
    out_.for_blocks(kRowBlock * d_, [&](const T* out, std::int64_t e0, std::int64_t n) {
      ops::row_dots(dev, dys.data() + e0, out, n / d_, d_, dw_routed.data() + e0 / d_);
    });
    out_.clear();
    ops::scale_rows(dev, dys.data(), routed_w_.data(), R, d_, dys.data());
    auto gather_x = [&](T* xs) { ops::gather_rows(dev, x_, rows_.data(), R, d_, xs); };
    const Buffer<Dev, T> dxs = experts_backward(std::move(dys), gather_x, offsets_.data(), E_, R);
    ops::moe_combine(dev, dxs.data(), slot_.data(), static_cast<const T*>(nullptr), N, k_, d_, dx);
  }
  // Each (token, slot) is routed once: dweights is dw_routed put back in token order (added
  // to the new buffer's zeros, which leaves every value as it is).
  ops::scatter_add_rows(dev, dw_routed.data(), choice_.data(), static_cast<const T*>(nullptr),
                        N * k_, 1, dweights.data());
  // The shared expert and its gate.
  Buffer<Dev, T> ds(N * d_), dz(N), part(N * d_);
  shared_out_.for_blocks(kRowBlock * d_, [&](const T* s, std::int64_t e0, std::int64_t n) {
    const std::int64_t r0 = e0 / d_;
    ops::shared_gate_backward(dev, s, shared_z_.data() + r0, dy + e0, n / d_, d_, ds.data() + e0,
                              dz.data() + r0);
  });
  shared_out_.clear();
  shared_.backward(ds.data(), part.data());
  ops::add(dev, dx, dx, part.data(), N * d_);
  ops::linear_backward(dev, precision_, x_, ps_.value(shared_gate_), dz.data(), N, d_, 1, dx,
                       ps_.grad(shared_gate_), /*accumulate=*/true);
  // The router, with the load-balancing loss's gradient on every probability.
  Buffer<Dev, T> dlogits(N * E_);
  ops::router_backward(dev, probs_.data(), idx_.data(), dweights.data(), N, E_, k_, renorm_,
                       dprob_.size() == 0 ? nullptr : dprob_.data(), dlogits.data());
  {
    ops::linear_backward(dev, Precision::plain, x_, ps_.value(router_), dlogits.data(), N, d_, E_,
                         dx, ps_.grad(router_), /*accumulate=*/true);
  }
}

template <typename T, typename Dev>
void MoeMlp<T, Dev>::do_release() {
  for (Buffer<Dev, T>* b : {&probs_, &weights_, &shared_z_, &routed_w_}) *b = Buffer<Dev, T>();
  for (Kept<T, Dev>* b : {&shared_out_, &g_, &u_, &act_, &out_}) b->clear();
  idx_ = Buffer<Dev, std::int32_t>();
  xr_.clear();
  out_back_.clear();
  for (Buffer<Dev, std::int64_t>* b :
       {&offsets_, &rows_, &choice_, &slot_, &perm_, &local_offsets_})
    *b = Buffer<Dev, std::int64_t>();
  shared_.release(Keep::nothing);
}

#define GDN_INSTANTIATE(T, Dev) template class MoeMlp<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
