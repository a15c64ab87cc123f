#include "gdn/chunk.h"

#include <algorithm>
#include <cmath>

#include "gdn/linalg.h"

namespace gdn {

using la::matmul;

namespace {

// Tinv = (I + L)^{-1} for strictly lower L (n x n, leading dimension ld; Tinv zeroed by
// the caller). Recursive blocking: [A 0; B D]^{-1} = [A^-1 0; -D^-1 B A^-1  D^-1], so
// all but the 16 x 16 diagonal blocks are GEMMs. tmp holds n x n / 4 elements.
template <typename T>
void unit_lower_inverse(const T* L, T* Tinv, int n, int ld, T* tmp) {
  if (n <= 16) {
    // Forward substitution, row by row: T_i = e_i - sum_{j<i} L_ij T_j.
    for (int i = 0; i < n; ++i) {
      T* Ti = Tinv + i * ld;
      Ti[i] = 1;
      for (int j = 0; j < i; ++j) {
        const T l = L[i * ld + j];
        const T* Tj = Tinv + j * ld;
        for (int c = 0; c <= j; ++c) Ti[c] -= l * Tj[c];
      }
    }
    return;
  }
  const int h = n / 2;
  unit_lower_inverse(L, Tinv, h, ld, tmp);
  unit_lower_inverse(L + h * ld + h, Tinv + h * ld + h, n - h, ld, tmp);
  // Tinv_21 = -Tinv_22 (L_21 Tinv_11)
  la::gemm(false, false, n - h, h, h, T(1), L + h * ld, ld, Tinv, ld, T(0), tmp, h);
  la::gemm(false, false, n - h, h, n - h, T(-1), Tinv + h * ld + h, ld, tmp, h, T(0), Tinv + h * ld,
           ld);
}

}  // namespace

template <typename T>
ChunkMath<T>::ChunkMath(int C, int K, int V, T scale)
    : C_(C), K_(K), V_(V), s_(scale), fl_{C, K, V} {
  const std::size_t CC = std::size_t(C) * C, CK = std::size_t(C) * K, CV = std::size_t(C) * V;
  for (auto* v : {&G_, &Gam_, &e_, &dGam_}) v->resize(C);
  for (auto* v : {&D_, &KK_, &QK_, &L_, &Tm_, &dP_, &dD_, &dT_, &tmpCC_, &dL_}) v->resize(CC);
  for (auto* v : {&bGK_, &tmpCK_, &dkt_, &X_, &dKb_}) v->resize(CK);
  for (auto* v : {&bV_, &vnew_, &tmpCV_, &dvn_, &dVb_}) v->resize(CV);
  f_.resize(fl_.size());
}

// G = cumsum(g), Gamma = exp(G), e = exp(G_C - G), D_ij = exp(G_i - G_j) for i >= j and 0
// above the diagonal (where the exponent is positive and could overflow).
template <typename T>
void ChunkMath<T>::decay_terms(const T* g) {
  T acc = 0;
  for (int i = 0; i < C_; ++i) {
    acc += g[i];
    G_[i] = acc;
    Gam_[i] = std::exp(acc);
  }
  for (int i = 0; i < C_; ++i) {
    e_[i] = std::exp(G_[C_ - 1] - G_[i]);
    for (int j = 0; j < C_; ++j) D_[i * C_ + j] = j <= i ? std::exp(G_[i] - G_[j]) : T(0);
  }
}

// L = strict_lower(diag(beta) K K^T .* D), T = (I + L)^{-1}, u = T (beta V),
// w = T (beta Gamma K), k~ = e K, P = lower_incl(Q K^T .* D), q_g = Gamma Q.
template <typename T>
void ChunkMath<T>::wy(const ChunkRows<T>& r, T* w, T* u, T* kt, T* qg, T* P) {
  const int C = C_, K = K_, V = V_;
  matmul(false, true, C, C, K, T(1), r.k, r.k, T(0), KK_.data());
  matmul(false, true, C, C, K, T(1), r.q, r.k, T(0), QK_.data());
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < C; ++j) {
      const int ij = i * C + j;
      L_[ij] = j < i ? r.beta[i] * KK_[ij] * D_[ij] : T(0);
      P[ij] = QK_[ij] * D_[ij];  // D is zero above the diagonal
    }
  std::fill(Tm_.begin(), Tm_.end(), T(0));
  unit_lower_inverse(L_.data(), Tm_.data(), C, C, tmpCC_.data());
  for (int i = 0; i < C; ++i) {
    for (int d = 0; d < V; ++d) bV_[i * V + d] = r.beta[i] * r.v[i * V + d];
    for (int d = 0; d < K; ++d) {
      bGK_[i * K + d] = r.beta[i] * Gam_[i] * r.k[i * K + d];
      kt[i * K + d] = e_[i] * r.k[i * K + d];
      qg[i * K + d] = Gam_[i] * r.q[i * K + d];
    }
  }
  matmul(false, false, C, V, C, T(1), Tm_.data(), bV_.data(), T(0), u);
  matmul(false, false, C, K, C, T(1), Tm_.data(), bGK_.data(), T(0), w);
}

template <typename T>
void ChunkMath<T>::prepare(const ChunkRows<T>& rows, T* f) {
  decay_terms(rows.g);
  f[0] = Gam_[C_ - 1];
  wy(rows, fl_.w(f), fl_.u(f), fl_.kt(f), fl_.qg(f), fl_.P(f));
}

template <typename T>
void ChunkMath<T>::step(const T* f, T* h, T* o) {
  const int C = C_, K = K_, V = V_;
  T* vnew = vnew_.data();
  std::copy_n(fl_.u(f), C * V, vnew);
  matmul(false, false, C, V, K, T(-1), fl_.w(f), h, T(1), vnew);  // v_new = u - w h
  if (o) {
    matmul(false, false, C, V, K, s_, fl_.qg(f), h, T(0), o);
    matmul(false, false, C, V, C, s_, fl_.P(f), vnew, T(1), o);
  }
  matmul(true, false, K, V, C, T(1), fl_.kt(f), vnew, ChunkFactors<T>::gamma(f), h);
}

template <typename T>
void ChunkMath<T>::compose(const T* f, T* M) {
  const int C = C_, K = K_;
  matmul(false, false, C, K, K, T(1), fl_.w(f), M, T(0), tmpCK_.data());  // w M
  matmul(true, false, K, K, C, T(-1), fl_.kt(f), tmpCK_.data(), ChunkFactors<T>::gamma(f), M);
}

template <typename T>
void ChunkMath<T>::adjoint(const T* f, T* mu, const T* dO) {
  const int C = C_, K = K_, V = V_;
  // dv_new = k~ mu + s P^T dO;  mu <- gamma mu + s q_g^T dO - w^T dv_new
  T* dvn = dvn_.data();
  matmul(false, false, C, V, K, T(1), fl_.kt(f), mu, T(0), dvn);
  matmul(true, false, C, V, C, s_, fl_.P(f), dO, T(1), dvn);
  matmul(true, false, K, V, C, s_, fl_.qg(f), dO, ChunkFactors<T>::gamma(f), mu);
  matmul(true, false, K, V, C, T(-1), fl_.w(f), dvn, T(1), mu);
}

// DESIGN.md section 2b, line by line.
template <typename T>
void ChunkMath<T>::backward(const ChunkRows<T>& r, const T* h, const T* dO, T* dh,
                            const ChunkRowGrads<T>& out) {
  const int C = C_, K = K_, V = V_;
  const T s = s_;
  decay_terms(r.g);
  T* f = f_.data();
  T *w = fl_.w(f), *kt = fl_.kt(f), *qg = fl_.qg(f), *u = fl_.u(f), *P = fl_.P(f);
  wy(r, w, u, kt, qg, P);
  const T gamma = Gam_[C - 1];
  T* vnew = vnew_.data();
  std::copy_n(u, C * V, vnew);
  matmul(false, false, C, V, K, T(-1), w, h, T(1), vnew);

  // h_next = gamma h + k~^T v_new
  T dgamma = la::dot(h, dh, K * V);
  matmul(false, true, C, K, V, T(1), vnew, dh, T(0), dkt_.data());  // dk~ = v_new dh_next^T
  matmul(false, false, C, V, K, T(1), kt, dh, T(0), dvn_.data());   // dv_new = k~ dh_next
  for (int x = 0; x < K * V; ++x) dh[x] *= gamma;
  // o = s (q_g h + P v_new)
  matmul(false, true, C, K, V, s, dO, h, T(0), X_.data());  // X = s dO h^T = d(q_g)
  for (int i = 0; i < C; ++i) {
    dGam_[i] = 0;
    for (int d = 0; d < K; ++d) {
      out.dq[i * K + d] = Gam_[i] * X_[i * K + d];
      dGam_[i] += r.q[i * K + d] * X_[i * K + d];
    }
  }
  matmul(true, false, K, V, C, s, qg, dO, T(1), dh);
  matmul(false, true, C, C, V, s, dO, vnew, T(0), dP_.data());
  matmul(true, false, C, V, C, s, P, dO, T(1), dvn_.data());
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < C; ++j) {
      const int ij = i * C + j;
      const T dp = j <= i ? dP_[ij] : T(0);
      dD_[ij] = dp * QK_[ij];
      dP_[ij] = dp * D_[ij];  // now dP .* D
    }
  matmul(false, false, C, K, C, T(1), dP_.data(), r.k, T(1), out.dq);
  matmul(true, false, C, K, C, T(1), dP_.data(), r.q, T(0), out.dk);
  // v_new = u - w h
  const T* du = dvn_.data();
  T* dw = tmpCK_.data();
  matmul(false, true, C, K, V, T(-1), du, h, T(0), dw);
  matmul(true, false, K, V, C, T(-1), w, du, T(1), dh);
  // u = T (beta V), w = T (beta Gamma K)
  matmul(false, true, C, C, V, T(1), du, bV_.data(), T(0), dT_.data());
  matmul(false, true, C, C, K, T(1), dw, bGK_.data(), T(1), dT_.data());
  matmul(true, false, C, V, C, T(1), Tm_.data(), du, T(0), dVb_.data());
  matmul(true, false, C, K, C, T(1), Tm_.data(), dw, T(0), dKb_.data());
  // T = (I + L)^{-1}: dL = strict_lower(-T^T dT T^T)
  matmul(true, false, C, C, C, T(1), Tm_.data(), dT_.data(), T(0), tmpCC_.data());
  matmul(false, true, C, C, C, T(-1), tmpCC_.data(), Tm_.data(), T(0), dL_.data());
  for (int i = 0; i < C; ++i) {
    T db = 0;
    for (int j = 0; j < C; ++j) {
      const int ij = i * C + j;
      const T dl = j < i ? dL_[ij] : T(0);
      const T dld = dl * D_[ij];
      db += dld * KK_[ij];
      dD_[ij] += dl * r.beta[i] * KK_[ij];
      dL_[ij] = r.beta[i] * dld;  // now beta .* (dL .* D): the gradient of K K^T
    }
    out.dbeta[i] = db;
  }
  matmul(false, false, C, K, C, T(1), dL_.data(), r.k, T(1), out.dk);
  matmul(true, false, C, K, C, T(1), dL_.data(), r.k, T(1), out.dk);
  T sum_ede = 0;
  for (int i = 0; i < C; ++i) {
    T rv = 0, rk = 0, de = 0;
    for (int d = 0; d < V; ++d) {
      out.dv[i * V + d] = r.beta[i] * dVb_[i * V + d];
      rv += r.v[i * V + d] * dVb_[i * V + d];
    }
    for (int d = 0; d < K; ++d) {
      const T kx = r.k[i * K + d];
      rk += kx * dKb_[i * K + d];
      de += kx * dkt_[i * K + d];
      out.dk[i * K + d] += r.beta[i] * Gam_[i] * dKb_[i * K + d] + e_[i] * dkt_[i * K + d];
    }
    out.dbeta[i] += rv + Gam_[i] * rk;
    dGam_[i] += r.beta[i] * rk;
    // dG without the column sums of dD .* D, added below.
    T rowsum = 0;
    for (int j = 0; j <= i; ++j) rowsum += dD_[i * C + j] * D_[i * C + j];
    out.dg[i] = Gam_[i] * dGam_[i] + rowsum - e_[i] * de;
    sum_ede += e_[i] * de;
  }
  for (int j = 0; j < C; ++j) {
    T colsum = 0;
    for (int i = j; i < C; ++i) colsum += dD_[i * C + j] * D_[i * C + j];
    out.dg[j] -= colsum;
  }
  out.dg[C - 1] += sum_ede + gamma * dgamma;
  for (int i = C - 2; i >= 0; --i) out.dg[i] += out.dg[i + 1];  // reverse cumulative sum
}

template class ChunkMath<float>;
template class ChunkMath<double>;

}  // namespace gdn
