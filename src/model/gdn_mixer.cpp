#include "model/gdn_mixer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "cp/conv_halo.h"
#include "ops/conv/conv.h"
#include "ops/convert/convert.h"
#include "ops/elementwise/elementwise.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/gating/gating.h"
#include "ops/linear/linear.h"
#include "runtime/devices.h"

namespace gdn {

template <typename T, typename Dev>
GdnMixer<T, Dev>::GdnMixer(ParamStore<T, Dev>& ps, const std::string& prefix, const ModelConfig& c,
                           int chunk_size, Precision precision)
    : Mixer<T, Dev>(prefix + "linear_attn"),
      ps_(ps),
      precision_(precision),
      d_(c.hidden_size),
      Hk_(c.linear_num_key_heads),
      Hv_(c.linear_num_value_heads),
      K_(c.linear_key_head_dim),
      V_(c.linear_value_head_dim),
      W_(c.linear_conv_kernel_dim),
      chunk_(chunk_size),
      eps_(c.rms_norm_eps) {
  const std::string p = prefix + "linear_attn.";
  // Rows of in_proj_qkv: [q (Hk K) | k (Hk K) | v (Hv V)], heads in order.
  in_proj_qkv_ = ps.add(p + "in_proj_qkv.weight", {conv_dim(), d_}, true);
  in_proj_z_ = ps.add(p + "in_proj_z.weight", {v_dim(), d_}, true);
  in_proj_b_ = ps.add(p + "in_proj_b.weight", {Hv_, d_}, true);
  in_proj_a_ = ps.add(p + "in_proj_a.weight", {Hv_, d_}, true);
  conv1d_ = ps.add(p + "conv1d.weight", {conv_dim(), W_}, true);
  A_log_ = ps.add(p + "A_log", {Hv_}, false);
  dt_bias_ = ps.add(p + "dt_bias", {Hv_}, false);
  norm_ = ps.add(p + "norm.weight", {V_}, false);
  out_proj_ = ps.add(p + "out_proj.weight", {d_, v_dim()}, true);
}

template <typename T, typename Dev>
void GdnMixer<T, Dev>::init(Rng& rng, double std, const HostParams<T>& host) const {
  auto span = [&](ParamId id) {
    T* p = host.at(ps_.info(id));
    return std::pair{p, p + ps_.info(id).size};
  };
  auto normal = [&](ParamId id) {
    for (auto [w, end] = span(id); w != end; ++w) *w = T(std * rng.normal());
  };
  normal(in_proj_qkv_);
  normal(in_proj_z_);
  normal(in_proj_b_);
  normal(in_proj_a_);
  normal(conv1d_);
  for (auto [w, end] = span(A_log_); w != end; ++w) *w = T(std::log(rng.uniform(0.01, 16.0)));
  for (auto [w, end] = span(dt_bias_); w != end; ++w) *w = T(1);
  for (auto [w, end] = span(norm_); w != end; ++w) *w = T(1);
  normal(out_proj_);
}

template <typename T, typename Dev>
ActivationElems GdnMixer<T, Dev>::activations(const ModelConfig& c, const ShardShape& s) {
  const std::int64_t N = s.tokens(), Hv = c.linear_num_value_heads;
  const std::int64_t qk = std::int64_t(c.linear_num_key_heads) * c.linear_key_head_dim;
  const std::int64_t vd = Hv * c.linear_value_head_dim, Cc = 2 * qk + vd;
  ActivationElems a;
  // z, o, normed, v; q, k; b, a, beta, g; conv_in (with the halo rows).
  a.kept = N * (4 * vd + 2 * qk + 4 * Hv) +
           (N + std::int64_t(s.B) * (c.linear_conv_kernel_dim - 1)) * Cc;
  // The CP core (cp/gdn_layer_core.h), on the estimate's shard of Tl tokens per row.
  const GdnCoreElems core =
      gdn_core_elems(GdnProblem(s.B, s.Tl, c.linear_num_key_heads, c.linear_num_value_heads,
                                c.linear_key_head_dim, c.linear_value_head_dim, s.chunk_size),
                     s.P, s.scan, omp_get_max_threads());
  // z, o, normed, conv_in and the core's inputs q, k, v, beta are kept in bf16 in the bf16
  // mode (ops/convert/kept.h), and the core's normalised q, k not at all; the backward decodes
  // normed, then o and z, then q, k, v, beta (and normalises q, k again), then conv_in.
  const std::int64_t conv_rows = N + std::int64_t(s.B) * (c.linear_conv_kernel_dim - 1);
  const std::int64_t inputs = N * (2 * qk + vd + Hv);
  a.kept_bf16 = 3 * N * vd + conv_rows * Cc + inputs;
  a.remade_bf16 = 2 * N * qk;
  a.decoded = std::max({2 * N * vd, conv_rows * Cc, inputs + 2 * N * qk});
  a.kept += core.kept;
  // Recomputing, the conv halo and what the core replays from stay.
  a.exchanged = std::int64_t(s.B) * (c.linear_conv_kernel_dim - 1) * Cc + core.replayed;
  // Backward scratch, each freed after its last reader (do_backward): the most at once is
  // through the core (d_o, dz, dq, dk, dv, dg, dbeta and the core's own) or through the conv
  // (dz, db, da and two of dconv_out, dconv_in, dmixed); and dx_part.
  a.transient =
      std::max(N * (3 * vd + 2 * qk + 2 * Hv) + core.transient, N * (vd + 2 * Hv + 2 * Cc)) +
      N * c.hidden_size;
  return a;
}

template <typename T, typename Dev>
void GdnMixer<T, Dev>::do_forward(const CpContext& cp, int B, const T* x, T* y, bool replay) {
  B_ = B;
  x_ = x;
  const std::int64_t Tl = cp.tokens(), N = std::int64_t(B) * Tl, H = W_ - 1;
  const int Cc = conv_dim();
  const Dev dev{};
  // Projections: the conv channels [q|k|v], the gate z, and b, a.
  Buffer<Dev, T> mixed(N * Cc);
  b_.resize(N * Hv_);
  a_.resize(N * Hv_);
  ops::linear_forward(dev, precision_, x, ps_.value(in_proj_qkv_), N, d_, Cc, mixed.data());
  ops::linear_forward(dev, precision_, x, ps_.value(in_proj_z_), N, d_, v_dim(),
                      z_.open(N * v_dim(), precision_));
  ops::linear_forward(dev, precision_, x, ps_.value(in_proj_b_), N, d_, Hv_, b_.data());
  ops::linear_forward(dev, precision_, x, ps_.value(in_proj_a_), N, d_, Hv_, a_.data());
  // Causal conv over [halo; shard] per sequence, then SiLU.
  if (!replay) {  // a recomputation keeps the halo of the first forward
    halo_.resize(std::size_t(B) * H * Cc);
    conv_halo_forward<T, Dev>(cp.comm, mixed.data(), B, Tl, Cc, W_, halo_.data());
  }
  T* conv_in = conv_in_.open(std::int64_t(B) * (H + Tl) * Cc, precision_);
  Dev::copy_rows(conv_in, (H + Tl) * Cc, halo_.data(), H * Cc, H * Cc, B);
  Dev::copy_rows(conv_in + H * Cc, (H + Tl) * Cc, mixed.data(), Tl * Cc, Tl * Cc, B);
  if (cp.documents) {
    const std::vector<std::int64_t> pos = cp.documents->positions(cp.shard);
    pos_ = to_device<Dev>(pos.data(), pos.size());
  } else {
    pos_ = Buffer<Dev, std::int64_t>();
  }
  const std::int64_t* pos = pos_.size() ? pos_.data() : nullptr;
  Buffer<Dev, T> conv_out(N * Cc);
  mixed = Buffer<Dev, T>();  // in conv_in now: not held through the core
  ops::causal_conv_silu_forward(dev, conv_in, ps_.value(conv1d_), B, Tl, Cc, W_, conv_out.data(),
                                pos);
  conv_in_.seal();
  // The core wants q, k [B, Tl, Hk, K] and v [B, Tl, Hv, V] as separate tensors.
  Dev::copy_rows(q_.open(N * qk_dim(), precision_), qk_dim(), conv_out.data(), Cc, qk_dim(), N);
  Dev::copy_rows(k_.open(N * qk_dim(), precision_), qk_dim(), conv_out.data() + qk_dim(), Cc,
                 qk_dim(), N);
  Dev::copy_rows(v_.open(N * v_dim(), precision_), v_dim(), conv_out.data() + 2 * qk_dim(), Cc,
                 v_dim(), N);
  conv_out = Buffer<Dev, T>();  // in q, k, v now
  g_.resize(N * Hv_);
  ops::gdn_gating_forward(dev, b_.data(), a_.data(), ps_.value(A_log_), ps_.value(dt_bias_), N, Hv_,
                          beta_.open(N * Hv_, precision_), g_.data());
  // The GDN core with context parallelism; q and k are L2-normalised inside.
  GdnProblem p(B, cp.T_global, Hk_, Hv_, K_, V_, chunk_);
  p.l2norm_qk = true;
  p.precision = precision_;

  const bool bf16 = precision_ == Precision::bf16;  // the op's bf16 storage mode (gdn/bf16_op.h)
  if (bf16)
    for (Kept<T, Dev>* b : {&q_, &k_, &v_, &beta_}) ops::round_to_bf16(dev, b->values(), b->size());
  {
    const profile::Scope core_scope("gdn_core");
    core_.forward(cp, p,
                  {q_.values(), k_.values(), v_.values(), g_.data(), beta_.values(), nullptr},
                  o_.open(N * v_dim(), precision_));
  }
  for (Kept<T, Dev>* b : {&q_, &k_, &v_, &beta_}) b->seal();
  if (q_.bf16()) core_.release_inputs();  // its normalised q, k: rebind() makes them again
  if (bf16) ops::round_to_bf16(dev, o_.values(), o_.size());
  // Gated RMSNorm per value head, then out_proj.
  ops::gated_rmsnorm_forward(dev, o_.values(), z_.values(), ps_.value(norm_), N * Hv_, V_, eps_,
                             normed_.open(N * v_dim(), precision_));
  ops::linear_forward(dev, precision_, normed_.values(), ps_.value(out_proj_), N, v_dim(), d_, y);
  for (Kept<T, Dev>* b : {&z_, &o_, &normed_}) b->seal();
}

template <typename T, typename Dev>
void GdnMixer<T, Dev>::do_backward(const CpContext& cp, const T* dy, T* dx) {
  const int B = B_;
  const std::int64_t Tl = cp.tokens(), N = std::int64_t(B) * Tl, H = W_ - 1;
  const int Cc = conv_dim();
  const Dev dev{};
  // Each scratch buffer goes as soon as its last reader is done: the core's backward, the
  // layer's largest step, then holds only dz, d_o and the core's own (docs/design.md §6b).
  Buffer<Dev, T> d_o(N * v_dim()), dz(N * v_dim());
  {
    Buffer<Dev, T> dnormed(N * v_dim());
    ops::linear_backward(dev, precision_, normed_.view(), ps_.value(out_proj_), dy, N, v_dim(), d_,
                         dnormed.data(), ps_.grad(out_proj_));
    normed_.clear();
    ops::gated_rmsnorm_backward(dev, o_.view(), z_.view(), ps_.value(norm_), dnormed.data(),
                                N * Hv_, V_, eps_, d_o.data(), dz.data(), ps_.grad(norm_));
  }
  o_.clear();
  z_.clear();
  // The core's adjoint (three-phase CP backward).
  Buffer<Dev, T> dq(N * qk_dim()), dk(N * qk_dim()), dv(N * v_dim()), dg(N * Hv_), dbeta(N * Hv_);
  GdnGradView<T> cg{dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), nullptr};
  if (precision_ == Precision::bf16) ops::round_to_bf16(dev, d_o.data(), d_o.size());
  {
    const profile::Scope core_scope("gdn_core");
    if (q_.bf16())
      core_.rebind({q_.view(), k_.view(), v_.view(), g_.data(), beta_.view(), nullptr});
    core_.backward(cp, d_o.data(), cg);
  }
  for (Kept<T, Dev>* b : {&q_, &k_, &v_, &beta_}) b->clear();
  if (q_.bf16()) core_.release_inputs();
  d_o = Buffer<Dev, T>();
  Buffer<Dev, T> db(N * Hv_), da(N * Hv_);
  ops::gdn_gating_backward(dev, b_.data(), a_.data(), ps_.value(A_log_), ps_.value(dt_bias_),
                           dbeta.data(), dg.data(), N, Hv_, db.data(), da.data(), ps_.grad(A_log_),
                           ps_.grad(dt_bias_));
  for (Buffer<Dev, T>* b : {&dg, &dbeta}) *b = Buffer<Dev, T>();
  // Back through the conv (and its halo) to the projected channels.
  // (At most two of dconv_out, dconv_in, dmixed at a time.)
  Buffer<Dev, T> dconv_out(N * Cc);
  Dev::copy_rows(dconv_out.data(), Cc, dq.data(), qk_dim(), qk_dim(), N);
  Dev::copy_rows(dconv_out.data() + qk_dim(), Cc, dk.data(), qk_dim(), qk_dim(), N);
  Dev::copy_rows(dconv_out.data() + 2 * qk_dim(), Cc, dv.data(), v_dim(), v_dim(), N);
  for (Buffer<Dev, T>* b : {&dq, &dk, &dv}) *b = Buffer<Dev, T>();
  Buffer<Dev, T> dconv_in(std::size_t(B) * (H + Tl) * Cc);
  ops::causal_conv_silu_backward(dev, conv_in_.view(), ps_.value(conv1d_), dconv_out.data(), B, Tl,
                                 Cc, W_, dconv_in.data(), ps_.grad(conv1d_),
                                 pos_.size() ? pos_.data() : nullptr);
  conv_in_.clear();
  dconv_out = Buffer<Dev, T>();
  Buffer<Dev, T> dhalo(std::size_t(B) * H * Cc), dmixed(N * Cc);
  Dev::copy_rows(dhalo.data(), H * Cc, dconv_in.data(), (H + Tl) * Cc, H * Cc, B);
  Dev::copy_rows(dmixed.data(), Tl * Cc, dconv_in.data() + H * Cc, (H + Tl) * Cc, Tl * Cc, B);
  dconv_in = Buffer<Dev, T>();
  conv_halo_backward<T, Dev>(cp.comm, B, Tl, Cc, W_, dhalo.data(), dmixed.data());
  // The four input projections share x: their input gradients add up, in this order.
  ops::linear_backward(dev, precision_, x_, ps_.value(in_proj_qkv_), dmixed.data(), N, d_, Cc, dx,
                       ps_.grad(in_proj_qkv_));
  dmixed = Buffer<Dev, T>();
  ops::linear_backward(dev, precision_, x_, ps_.value(in_proj_z_), dz.data(), N, d_, v_dim(), dx,
                       ps_.grad(in_proj_z_), /*accumulate=*/true);
  ops::linear_backward(dev, precision_, x_, ps_.value(in_proj_b_), db.data(), N, d_, Hv_, dx,
                       ps_.grad(in_proj_b_), /*accumulate=*/true);
  ops::linear_backward(dev, precision_, x_, ps_.value(in_proj_a_), da.data(), N, d_, Hv_, dx,
                       ps_.grad(in_proj_a_), /*accumulate=*/true);
}

template <typename T, typename Dev>
void GdnMixer<T, Dev>::do_release(Keep keep) {
  for (Buffer<Dev, T>* b : {&b_, &a_, &g_}) *b = Buffer<Dev, T>();
  for (Kept<T, Dev>* b : {&q_, &k_, &v_, &beta_, &z_, &conv_in_, &o_, &normed_}) b->clear();
  if (keep == Keep::nothing) {
    halo_ = Buffer<Dev, T>();
    pos_ = Buffer<Dev, std::int64_t>();
  }
  core_.release(keep);
}

#define GDN_INSTANTIATE(T, Dev) template class GdnMixer<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
