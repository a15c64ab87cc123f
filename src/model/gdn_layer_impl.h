// GdnLayer's forward and backward, written once over its Backend. Included by the files
// that instantiate it for a backend (gdn_layer.cpp: host; the CUDA library: device).
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "cp/conv_halo.h"
#include "cp/gdn_cp.h"
#include "model/gdn_layer.h"

namespace gdn {

template <typename T, typename Backend>
GdnLayer<T, Backend>::GdnLayer(ParamStore<T>& ps, const std::string& prefix, const ModelConfig& c,
                               int chunk_size, Backend backend)
    : be_(std::move(backend)),
      d_(c.hidden_size),
      Hk_(c.linear_num_key_heads),
      Hv_(c.linear_num_value_heads),
      K_(c.linear_key_head_dim),
      V_(c.linear_value_head_dim),
      W_(c.linear_conv_kernel_dim),
      chunk_(chunk_size),
      eps_(c.rms_norm_eps),
      // Rows of in_proj_qkvz: [q (Hk K) | k (Hk K) | v (Hv V) | z (Hv V)]; of in_proj_ba:
      // [b (Hv) | a (Hv)]. Row blocks are contiguous, so each part is its own GEMM.
      in_proj_qkvz_(ps.add(prefix + "in_proj_qkvz.weight", {qkvz_dim(), d_}, true)),
      in_proj_ba_(ps.add(prefix + "in_proj_ba.weight", {2 * Hv_, d_}, true)),
      conv1d_(ps.add(prefix + "conv1d.weight", {conv_dim(), W_}, true)),
      A_log_(ps.add(prefix + "A_log", {Hv_}, false)),
      dt_bias_(ps.add(prefix + "dt_bias", {Hv_}, false)),
      norm_(ps.add(prefix + "norm.weight", {V_}, false)),
      out_proj_(ps.add(prefix + "out_proj.weight", {d_, v_dim()}, true)) {}

// Initialisation writes the host master values (ParamStore); a device backend uploads them.
template <typename T, typename Backend>
void GdnLayer<T, Backend>::init(Rng& rng, double std) {
  for (T& w : in_proj_qkvz_.value.data) w = T(std * rng.normal());
  for (T& w : in_proj_ba_.value.data) w = T(std * rng.normal());
  // PyTorch's default Conv1d init for a depthwise kernel: U(-1/sqrt(W), 1/sqrt(W)).
  const double bound = 1.0 / std::sqrt(double(W_));
  for (T& w : conv1d_.value.data) w = T(rng.uniform(-bound, bound));
  for (T& w : A_log_.value.data) w = T(std::log(16.0 * (1.0 - rng.uniform())));  // U(0, 16]
  std::fill(dt_bias_.value.data.begin(), dt_bias_.value.data.end(), T(1));
  std::fill(norm_.value.data.begin(), norm_.value.data.end(), T(1));
  for (T& w : out_proj_.value.data) w = T(std * rng.normal());
}

template <typename T, typename Backend>
void GdnLayer<T, Backend>::forward(Communicator& cp, int B, std::int64_t Tl, std::int64_t T_global,
                                   const T* x, T* y) {
  B_ = B;
  Tl_ = Tl;
  T_global_ = T_global;
  const std::int64_t N = std::int64_t(B) * Tl, H = W_ - 1;
  const int Cc = conv_dim();
  const T* Wq = be_.value(in_proj_qkvz_);
  const T* Wba = be_.value(in_proj_ba_);
  x_.resize(N * d_);
  be_.copy(x_.data(), x, N * d_);
  // Projections: the conv channels [q|k|v], the gate z, and b, a.
  Vector mixed(N * Cc);
  z_.resize(N * v_dim());
  b_.resize(N * Hv_);
  a_.resize(N * Hv_);
  be_.linear_forward(x, Wq, N, d_, Cc, mixed.data());
  be_.linear_forward(x, Wq + std::int64_t(Cc) * d_, N, d_, v_dim(), z_.data());
  be_.linear_forward(x, Wba, N, d_, Hv_, b_.data());
  be_.linear_forward(x, Wba + std::int64_t(Hv_) * d_, N, d_, Hv_, a_.data());
  // Causal conv over [halo; shard] per sequence, then SiLU.
  Vector halo(std::size_t(B) * H * Cc);
  conv_halo_forward<T, typename Backend::Space>(cp, mixed.data(), B, Tl, Cc, W_, halo.data());
  conv_in_.resize(std::size_t(B) * (H + Tl) * Cc);
  be_.copy_rows(conv_in_.data(), (H + Tl) * Cc, halo.data(), H * Cc, H * Cc, B);
  be_.copy_rows(conv_in_.data() + H * Cc, (H + Tl) * Cc, mixed.data(), Tl * Cc, Tl * Cc, B);
  Vector conv_out(N * Cc);
  be_.causal_conv_silu_forward(conv_in_.data(), be_.value(conv1d_), B, Tl, Cc, W_, conv_out.data());
  // The core wants q, k [B, Tl, Hk, K] and v [B, Tl, Hv, V] as separate tensors.
  q_.resize(N * qk_dim());
  k_.resize(N * qk_dim());
  v_.resize(N * v_dim());
  be_.copy_rows(q_.data(), qk_dim(), conv_out.data(), Cc, qk_dim(), N);
  be_.copy_rows(k_.data(), qk_dim(), conv_out.data() + qk_dim(), Cc, qk_dim(), N);
  be_.copy_rows(v_.data(), v_dim(), conv_out.data() + 2 * qk_dim(), Cc, v_dim(), N);
  beta_.resize(N * Hv_);
  g_.resize(N * Hv_);
  be_.gdn_gating_forward(b_.data(), a_.data(), be_.value(A_log_), be_.value(dt_bias_), N, Hv_,
                         beta_.data(), g_.data());
  // The GDN core with context parallelism; q and k are L2-normalised inside.
  GdnProblem p;
  p.B = B;
  p.T = static_cast<int>(T_global);
  p.Hk = Hk_;
  p.Hv = Hv_;
  p.K = K_;
  p.V = V_;
  p.chunk_size = chunk_;
  p.l2norm_qk = true;
  core_ = std::make_unique<GdnContextParallel<T, typename Backend::Space>>(
      cp, p, GdnTensors<T>{q_.data(), k_.data(), v_.data(), g_.data(), beta_.data(), nullptr});
  o_.resize(N * v_dim());
  core_->forward(o_.data(), nullptr);
  // Gated RMSNorm per value head, then out_proj.
  normed_.resize(N * v_dim());
  be_.gated_rmsnorm_forward(o_.data(), z_.data(), be_.value(norm_), N * Hv_, V_, eps_,
                            normed_.data());
  be_.linear_forward(normed_.data(), be_.value(out_proj_), N, v_dim(), d_, y);
}

template <typename T, typename Backend>
void GdnLayer<T, Backend>::backward(Communicator& cp, const T* dy, T* dx) {
  const int B = B_;
  const std::int64_t Tl = Tl_, N = std::int64_t(B) * Tl, H = W_ - 1;
  const int Cc = conv_dim();
  Vector dnormed(N * v_dim()), d_o(N * v_dim()), dz(N * v_dim());
  be_.linear_backward(normed_.data(), be_.value(out_proj_), dy, N, v_dim(), d_, dnormed.data(),
                      be_.grad(out_proj_));
  be_.gated_rmsnorm_backward(o_.data(), z_.data(), be_.value(norm_), dnormed.data(), N * Hv_, V_,
                             eps_, d_o.data(), dz.data(), be_.grad(norm_));
  // The core's adjoint (three-phase CP backward).
  Vector dq(N * qk_dim()), dk(N * qk_dim()), dv(N * v_dim()), dg(N * Hv_), dbeta(N * Hv_);
  GdnGrads<T> cg{dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), nullptr};
  core_->backward(d_o.data(), nullptr, cg);
  Vector db(N * Hv_), da(N * Hv_);
  be_.gdn_gating_backward(b_.data(), a_.data(), be_.value(A_log_), be_.value(dt_bias_),
                          dbeta.data(), dg.data(), N, Hv_, db.data(), da.data(), be_.grad(A_log_),
                          be_.grad(dt_bias_));
  // Back through the conv (and its halo) to the projected channels.
  Vector dconv_out(N * Cc);
  be_.copy_rows(dconv_out.data(), Cc, dq.data(), qk_dim(), qk_dim(), N);
  be_.copy_rows(dconv_out.data() + qk_dim(), Cc, dk.data(), qk_dim(), qk_dim(), N);
  be_.copy_rows(dconv_out.data() + 2 * qk_dim(), Cc, dv.data(), v_dim(), v_dim(), N);
  Vector dconv_in(std::size_t(B) * (H + Tl) * Cc);
  be_.causal_conv_silu_backward(conv_in_.data(), be_.value(conv1d_), dconv_out.data(), B, Tl, Cc,
                                W_, dconv_in.data(), be_.grad(conv1d_));
  Vector dhalo(std::size_t(B) * H * Cc), dmixed(N * Cc);
  be_.copy_rows(dhalo.data(), H * Cc, dconv_in.data(), (H + Tl) * Cc, H * Cc, B);
  be_.copy_rows(dmixed.data(), Tl * Cc, dconv_in.data() + H * Cc, (H + Tl) * Cc, Tl * Cc, B);
  conv_halo_backward<T, typename Backend::Space>(cp, B, Tl, Cc, W_, dhalo.data(), dmixed.data());
  // The four input projections share x: their input gradients add up.
  const T* Wq = be_.value(in_proj_qkvz_);
  T* dWq = be_.grad(in_proj_qkvz_);
  const T* Wba = be_.value(in_proj_ba_);
  T* dWba = be_.grad(in_proj_ba_);
  Vector dx_part(N * d_);
  be_.linear_backward(x_.data(), Wq, dmixed.data(), N, d_, Cc, dx, dWq);
  be_.linear_backward(x_.data(), Wq + std::int64_t(Cc) * d_, dz.data(), N, d_, v_dim(),
                      dx_part.data(), dWq + std::int64_t(Cc) * d_);
  be_.add(dx, dx, dx_part.data(), dx_part.size());
  be_.linear_backward(x_.data(), Wba, db.data(), N, d_, Hv_, dx_part.data(), dWba);
  be_.add(dx, dx, dx_part.data(), dx_part.size());
  be_.linear_backward(x_.data(), Wba + std::int64_t(Hv_) * d_, da.data(), N, d_, Hv_,
                      dx_part.data(), dWba + std::int64_t(Hv_) * d_);
  be_.add(dx, dx, dx_part.data(), dx_part.size());
}

}  // namespace gdn
