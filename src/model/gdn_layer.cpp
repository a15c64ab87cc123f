#include "model/gdn_layer.h"

#include <algorithm>
#include <cmath>

#include "cp/conv_halo.h"
#include "model/ops.h"

namespace gdn {

namespace {

// dst += src over n elements.
template <typename T>
void add_into(T* dst, const T* src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Moves rows between [B, Tl, C] and the [B, W - 1 + Tl, C] conv input with its halo.
template <typename T>
void place_rows(const T* src, std::int64_t src_rows, std::int64_t src_off, T* dst,
                std::int64_t dst_rows, std::int64_t dst_off, int B, std::int64_t n, int C) {
  for (int b = 0; b < B; ++b)
    std::copy_n(src + (b * src_rows + src_off) * C, n * C, dst + (b * dst_rows + dst_off) * C);
}

}  // namespace

template <typename T>
GdnLayer<T>::GdnLayer(ParamStore<T>& ps, const std::string& prefix, const ModelConfig& c,
                      int chunk_size)
    : d_(c.hidden_size),
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

template <typename T>
void GdnLayer<T>::init(Rng& rng, double std) {
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

template <typename T>
void GdnLayer<T>::forward(Communicator& cp, int B, std::int64_t Tl, std::int64_t T_global,
                          const T* x, T* y) {
  B_ = B;
  Tl_ = Tl;
  T_global_ = T_global;
  const std::int64_t N = std::int64_t(B) * Tl, H = W_ - 1;
  const int Cc = conv_dim();
  const T* Wq = in_proj_qkvz_.value.ptr();
  x_.assign(x, x + N * d_);
  // Projections: the conv channels [q|k|v], the gate z, and b, a.
  std::vector<T> mixed(N * Cc);
  z_.resize(N * v_dim());
  b_.resize(N * Hv_);
  a_.resize(N * Hv_);
  ops::linear_forward(x, Wq, N, d_, Cc, mixed.data());
  ops::linear_forward(x, Wq + std::int64_t(Cc) * d_, N, d_, v_dim(), z_.data());
  ops::linear_forward(x, in_proj_ba_.value.ptr(), N, d_, Hv_, b_.data());
  ops::linear_forward(x, in_proj_ba_.value.ptr() + std::int64_t(Hv_) * d_, N, d_, Hv_, a_.data());
  // Causal conv over [halo; shard] per sequence, then SiLU.
  std::vector<T> halo(std::size_t(B) * H * Cc);
  conv_halo_forward(cp, mixed.data(), B, Tl, Cc, W_, halo.data());
  conv_in_.resize(std::size_t(B) * (H + Tl) * Cc);
  place_rows(halo.data(), H, 0, conv_in_.data(), H + Tl, 0, B, H, Cc);
  place_rows(mixed.data(), Tl, 0, conv_in_.data(), H + Tl, H, B, Tl, Cc);
  std::vector<T> conv_out(N * Cc);
  ops::causal_conv_silu_forward(conv_in_.data(), conv1d_.value.ptr(), B, Tl, Cc, W_,
                                conv_out.data());
  // The core wants q, k [B, Tl, Hk, K] and v [B, Tl, Hv, V] as separate tensors.
  q_.resize(N * qk_dim());
  k_.resize(N * qk_dim());
  v_.resize(N * v_dim());
  for (std::int64_t i = 0; i < N; ++i) {
    const T* row = conv_out.data() + i * Cc;
    std::copy_n(row, qk_dim(), q_.data() + i * qk_dim());
    std::copy_n(row + qk_dim(), qk_dim(), k_.data() + i * qk_dim());
    std::copy_n(row + 2 * qk_dim(), v_dim(), v_.data() + i * v_dim());
  }
  beta_.resize(N * Hv_);
  g_.resize(N * Hv_);
  ops::gdn_gating_forward(b_.data(), a_.data(), A_log_.value.ptr(), dt_bias_.value.ptr(), N, Hv_,
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
  core_ = std::make_unique<GdnContextParallel<T>>(
      cp, p, GdnTensors<T>{q_.data(), k_.data(), v_.data(), g_.data(), beta_.data(), nullptr});
  o_.resize(N * v_dim());
  core_->forward(o_.data(), nullptr);
  // Gated RMSNorm per value head, then out_proj.
  normed_.resize(N * v_dim());
  ops::gated_rmsnorm_forward(o_.data(), z_.data(), norm_.value.ptr(), N * Hv_, V_, eps_,
                             normed_.data());
  ops::linear_forward(normed_.data(), out_proj_.value.ptr(), N, v_dim(), d_, y);
}

template <typename T>
void GdnLayer<T>::backward(Communicator& cp, const T* dy, T* dx) {
  const int B = B_;
  const std::int64_t Tl = Tl_, N = std::int64_t(B) * Tl, H = W_ - 1;
  const int Cc = conv_dim();
  std::vector<T> dnormed(N * v_dim()), d_o(N * v_dim()), dz(N * v_dim());
  ops::linear_backward(normed_.data(), out_proj_.value.ptr(), dy, N, v_dim(), d_, dnormed.data(),
                       out_proj_.grad.ptr());
  ops::gated_rmsnorm_backward(o_.data(), z_.data(), norm_.value.ptr(), dnormed.data(), N * Hv_, V_,
                              eps_, d_o.data(), dz.data(), norm_.grad.ptr());
  // The core's adjoint (three-phase CP backward).
  std::vector<T> dq(N * qk_dim()), dk(N * qk_dim()), dv(N * v_dim()), dg(N * Hv_), dbeta(N * Hv_);
  GdnGrads<T> cg{dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), nullptr};
  core_->backward(d_o.data(), nullptr, cg);
  std::vector<T> db(N * Hv_), da(N * Hv_);
  ops::gdn_gating_backward(b_.data(), a_.data(), A_log_.value.ptr(), dt_bias_.value.ptr(),
                           dbeta.data(), dg.data(), N, Hv_, db.data(), da.data(), A_log_.grad.ptr(),
                           dt_bias_.grad.ptr());
  // Back through the conv (and its halo) to the projected channels.
  std::vector<T> dconv_out(N * Cc);
  for (std::int64_t i = 0; i < N; ++i) {
    T* row = dconv_out.data() + i * Cc;
    std::copy_n(dq.data() + i * qk_dim(), qk_dim(), row);
    std::copy_n(dk.data() + i * qk_dim(), qk_dim(), row + qk_dim());
    std::copy_n(dv.data() + i * v_dim(), v_dim(), row + 2 * qk_dim());
  }
  std::vector<T> dconv_in(std::size_t(B) * (H + Tl) * Cc);
  ops::causal_conv_silu_backward(conv_in_.data(), conv1d_.value.ptr(), dconv_out.data(), B, Tl, Cc,
                                 W_, dconv_in.data(), conv1d_.grad.ptr());
  std::vector<T> dhalo(std::size_t(B) * H * Cc), dmixed(N * Cc);
  place_rows(dconv_in.data(), H + Tl, 0, dhalo.data(), H, 0, B, H, Cc);
  place_rows(dconv_in.data(), H + Tl, H, dmixed.data(), Tl, 0, B, Tl, Cc);
  conv_halo_backward(cp, B, Tl, Cc, W_, dhalo.data(), dmixed.data());
  // The four input projections share x: their input gradients add up.
  const T* Wq = in_proj_qkvz_.value.ptr();
  T* dWq = in_proj_qkvz_.grad.ptr();
  const T* Wba = in_proj_ba_.value.ptr();
  T* dWba = in_proj_ba_.grad.ptr();
  std::vector<T> dx_part(N * d_);
  ops::linear_backward(x_.data(), Wq, dmixed.data(), N, d_, Cc, dx, dWq);
  ops::linear_backward(x_.data(), Wq + std::int64_t(Cc) * d_, dz.data(), N, d_, v_dim(),
                       dx_part.data(), dWq + std::int64_t(Cc) * d_);
  add_into(dx, dx_part.data(), dx_part.size());
  ops::linear_backward(x_.data(), Wba, db.data(), N, d_, Hv_, dx_part.data(), dWba);
  add_into(dx, dx_part.data(), dx_part.size());
  ops::linear_backward(x_.data(), Wba + std::int64_t(Hv_) * d_, da.data(), N, d_, Hv_,
                       dx_part.data(), dWba + std::int64_t(Hv_) * d_);
  add_into(dx, dx_part.data(), dx_part.size());
}

template class GdnLayer<float>;
template class GdnLayer<double>;

}  // namespace gdn
