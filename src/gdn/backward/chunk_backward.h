// One chunk's whole backward (docs/design.md §2b), after fla's chunk_bwd_dv_local,
// chunk_bwd_dqkwg and prepare_wy_bwd: from the chunk's entry state and exit adjoint, the
// gradients of its rows and its entry adjoint. ChunkKernel's body for any Exec; the GPU's
// fp32 kernels are backward_cuda.cu, the bf16 mode's two kernels backward_bf16.h.
#pragma once

#include "gdn/chunk/chunk_kernel.h"
#include "gdn/prepare/chunk_prepare.h"

namespace gdn {

// docs/design.md §2b, line by line.
template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::backward(const ChunkRows<T>& r, const T* h, const T* dO, T* dh,
                                           const ChunkRowGrads<T>& out) {
  const int C = C_, K = K_, V = V_;
  const T s = s_;
  decay_terms(r.g);
  T* f = f_;
  T *w = fl_.w(f), *kt = fl_.kt(f), *qg = fl_.qg(f), *u = fl_.u(f), *P = fl_.P(f);
  wy(r, w, u, kt, qg, P);
  const T gamma = Gam_[C - 1];
  for (int x = ex_.tid(); x < C * V; x += ex_.nthreads()) vnew_[x] = u[x];
  mm(false, false, C, V, K, T(-1), w, h, T(1), vnew_);

  // h_next = gamma h + k~^T v_new. dgamma = <h, dh_next>: row sums now, their sum below.
  for (int i = ex_.tid(); i < K; i += ex_.nthreads()) redK_[i] = row_dot(h + i * V, dh + i * V, V);
  mm(false, true, C, K, V, T(1), vnew_, dh, T(0), dkt_);  // dk~ = v_new dh_next^T
  mm(false, false, C, V, K, T(1), kt, dh, T(0), dvn_);    // dv_new = k~ dh_next
  for (int x = ex_.tid(); x < K * V; x += ex_.nthreads()) dh[x] *= gamma;
  // o = s (q_g h + P v_new)
  mm(false, true, C, K, V, s, dO, h, T(0), X_);  // X = s dO h^T = d(q_g)
  each2d(C, K, [&](int i, int d) { out.dq[i * K + d] = Gam_[i] * X_[i * K + d]; });
  for (int i = ex_.tid(); i < C; i += ex_.nthreads())
    dGam_[i] = row_dot(r.q + i * K, X_ + i * K, K);
  mm(true, false, K, V, C, s, qg, dO, T(1), dh);
  mm(false, true, C, C, V, s, dO, vnew_, T(0), dP_, Structure::kLowerC);
  mm(true, false, C, V, C, s, P, dO, T(1), dvn_, Structure::kUpperA);
  each2d(C, C, [&](int i, int j) {
    const int ij = i * C + j;
    const bool in = j <= i;  // dP_ and QK_ hold only their lower triangles
    dD_[ij] = in ? dP_[ij] * QK_[ij] : T(0);
    dP_[ij] = in ? dP_[ij] * D_[ij] : T(0);  // now dP .* D, lower triangular
  });
  mm(false, false, C, K, C, T(1), dP_, r.k, T(1), out.dq, Structure::kLowerA);
  mm(true, false, C, K, C, T(1), dP_, r.q, T(0), out.dk, Structure::kUpperA);
  // v_new = u - w h
  const T* du = dvn_;
  T* dw = tmpCK_;
  mm(false, true, C, K, V, T(-1), du, h, T(0), dw);
  mm(true, false, K, V, C, T(-1), w, du, T(1), dh);
  // u = T (beta V), w = T (beta Gamma K): dVb = T^T du, dKb = T^T dw (T^T is upper).
  mm(true, false, C, V, C, T(1), Tm_, du, T(0), dVb_, Structure::kUpperA);
  mm(true, false, C, K, C, T(1), Tm_, dw, T(0), dKb_, Structure::kUpperA);
  // T = (I + L)^{-1}: dL = strict_lower(-T^T dT T^T) with dT = du (beta V)^T + dw (beta
  // Gamma K)^T, which is -(dVb u^T + dKb w^T): two C x C products instead of dT and two
  // C x C x C ones.
  mm(false, true, C, C, V, T(-1), dVb_, u, T(0), dL_, Structure::kLowerC);
  mm(false, true, C, C, K, T(-1), dKb_, w, T(1), dL_, Structure::kLowerC);
  for (int i = ex_.tid(); i < C; i += ex_.nthreads()) {
    T* dl = dL_ + i * C;  // dL, KK_ hold only their lower triangles: j < i
    const T* kk = KK_ + i * C;
    const T b = r.beta[i];
    for (int j = 0; j < i; ++j) {
      dD_[i * C + j] = fused(dl[j] * b, kk[j], dD_[i * C + j]);
      dl[j] *= D_[i * C + j];  // now dL .* D
    }
    out.dbeta[i] = row_dot(dl, kk, i);
    for (int j = 0; j < i; ++j) dl[j] *= b;  // now beta .* (dL .* D): the gradient of K K^T
  }
  ex_.sync();
  // dK += G K + G^T K with G = beta .* (dL .* D) strictly lower: one product with the
  // symmetric G + G^T (zero diagonal).
  each2d(C, C, [&](int i, int j) {
    tmpCC_[i * C + j] = j < i ? dL_[i * C + j] : j > i ? dL_[j * C + i] : T(0);
  });
  mm(false, false, C, K, C, T(1), tmpCC_, r.k, T(1), out.dk);
  for (int i = ex_.tid(); i < C; i += ex_.nthreads()) {
    const T rv = row_dot(r.v + i * V, dVb_ + i * V, V), rk = row_dot(r.k + i * K, dKb_ + i * K, K);
    const T de = row_dot(r.k + i * K, dkt_ + i * K, K);
    out.dbeta[i] += fused(Gam_[i], rk, rv);
    dGam_[i] = fused(r.beta[i], rk, dGam_[i]);
    // dG without the column sums of dD .* D, added below.
    const T rowsum = row_dot(dD_ + i * C, D_ + i * C, i + 1);
    out.dg[i] = fused(-e_[i], de, fused(Gam_[i], dGam_[i], rowsum));
    redC_[i] = e_[i] * de;
  }
  // The column sums of dD .* D read the rows of every thread; each is summed over i in
  // order (a serial Exec runs i outside, so its inner loop runs along a row).
  ex_.sync();
  if constexpr (Exec::serial) {
    for (int j = 0; j < C; ++j) csum_[j] = 0;
    for (int i = 0; i < C; ++i)
      for (int j = 0; j <= i; ++j) csum_[j] = fused(dD_[i * C + j], D_[i * C + j], csum_[j]);
  } else {
    for (int j = ex_.tid(); j < C; j += ex_.nthreads()) {
      T colsum = 0;
      for (int i = j; i < C; ++i) colsum = fused(dD_[i * C + j], D_[i * C + j], colsum);
      csum_[j] = colsum;
    }
  }
  each2d(C, V, [&](int i, int d) { out.dv[i * V + d] = r.beta[i] * dVb_[i * V + d]; });
  each2d(C, K, [&](int i, int d) {
    out.dk[i * K + d] += fused(r.beta[i] * Gam_[i], dKb_[i * K + d], e_[i] * dkt_[i * K + d]);
  });
  ex_.sync();
  for (int j = ex_.tid(); j < C; j += ex_.nthreads()) out.dg[j] -= csum_[j];
  ex_.sync();
  if (ex_.tid() == 0) {  // the scalar tail and the reverse cumulative sum: sequential
    T sum_ede = 0, dgamma = 0;
    for (int i = 0; i < C; ++i) sum_ede += redC_[i];
    for (int i = 0; i < K; ++i) dgamma += redK_[i];
    out.dg[C - 1] += fused(gamma, dgamma, sum_ede);
    // The reverse cumulative sum, restarting where the forward's sum restarted: a g = -inf
    // row gets no gradient (exp(g) dg = 0 there) and cuts the rows before it off from the
    // rows after it.
    for (int i = C - 1; i >= 0; --i) {
      if (hd::is_minus_inf(r.g[i]))
        out.dg[i] = 0;
      else if (i + 1 < C && seg_[i + 1] == seg_[i])
        out.dg[i] += out.dg[i + 1];
    }
  }
  ex_.sync();
}

}  // namespace gdn
