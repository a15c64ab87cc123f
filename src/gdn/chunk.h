// The chunked gated delta rule on one chunk of one (batch row, value head)
// (DESIGN.md section 2 and 2b). Every function works on C contiguous, zero-padded rows:
// the callers gather them from the [B, T, H, D] layouts. Padded rows carry g = 0,
// beta = 0 and zero q, k, v, which makes them an identity map with no output.
#pragma once

#include <vector>

namespace gdn {

// One chunk's rows, gathered and padded to C.
template <typename T>
struct ChunkRows {
  const T* q;     // C x K
  const T* k;     // C x K
  const T* v;     // C x V
  const T* g;     // C
  const T* beta;  // C
};

// Gradients of one chunk's rows (C rows; padded rows are written too and ignored).
template <typename T>
struct ChunkRowGrads {
  T* dq;     // C x K, overwritten
  T* dk;     // C x K, overwritten
  T* dv;     // C x V, overwritten
  T* dg;     // C, overwritten
  T* dbeta;  // C, overwritten
};

// The WY factors of a chunk, stored in one flat block of factor_size() elements:
// gamma, w (C x K), k~ (C x K), q_g (C x K), u (C x V), P (C x C).
template <typename T>
struct ChunkFactors {
  int C, K, V;
  std::size_t size() const { return 1 + 3 * std::size_t(C) * K + std::size_t(C) * V + C * C; }
  static T gamma(const T* f) { return f[0]; }
  // Accessors work on const and mutable blocks alike (F is T* or const T*).
  template <typename F>
  F w(F f) const {
    return f + 1;
  }
  template <typename F>
  F kt(F f) const {
    return f + 1 + C * K;
  }
  template <typename F>
  F qg(F f) const {
    return f + 1 + 2 * C * K;
  }
  template <typename F>
  F u(F f) const {
    return f + 1 + 3 * C * K;
  }
  template <typename F>
  F P(F f) const {
    return f + 1 + 3 * C * K + C * V;
  }
};

// Chunk kernels with their scratch space; make one per thread.
template <typename T>
class ChunkMath {
 public:
  ChunkMath(int C, int K, int V, T scale);

  const ChunkFactors<T>& layout() const { return fl_; }

  // WY factors of one chunk into f (layout().size() elements).
  void prepare(const ChunkRows<T>& rows, T* f);
  // h (K x V) <- gamma h + k~^T (u - w h); o (C x V) = s (q_g h + P (u - w h)) if o != null.
  void step(const T* f, T* h, T* o);
  // M (K x K) <- gamma M - k~^T (w M): the low-rank transition update, 2 K^2 C flops.
  void compose(const T* f, T* M);
  // mu (K x V) <- M_c^T mu + A_c^T dO: the adjoint of the chunk's entry state.
  void adjoint(const T* f, T* mu, const T* dO);
  // Full backward of one chunk. h: state entering the chunk; dh: on entry the adjoint of
  // the state leaving it, on return the adjoint of the state entering it.
  void backward(const ChunkRows<T>& rows, const T* h, const T* dO, T* dh,
                const ChunkRowGrads<T>& out);

 private:
  void decay_terms(const T* g);  // G, Gamma, e, masked D
  void wy(const ChunkRows<T>& rows, T* w, T* u, T* kt, T* qg, T* P);

  int C_, K_, V_;
  T s_;
  ChunkFactors<T> fl_;
  // Scratch (sizes in the constructor).
  std::vector<T> G_, Gam_, e_, D_, KK_, QK_, L_, Tm_, bV_, bGK_, f_, vnew_, tmpCV_, tmpCK_;
  std::vector<T> dkt_, dvn_, X_, dP_, dD_, dT_, dVb_, dKb_, tmpCC_, dL_, dGam_;
};

}  // namespace gdn
