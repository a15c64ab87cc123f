// The WY preparation of one chunk (docs/design.md §2, §2c), after fla's
// chunk_scaled_dot_kkt, solve_tril and recompute_w_u: the gates' segmented prefix sums and
// decays, L and P, T = (I + L)^{-1} by blocks, and the factors w, u, k~, q_g, P, gamma.
// ChunkKernel's bodies for any Exec: the host pass runs them with HostExec, the GPU's fp32
// kernel (prepare_cuda.cu) with CudaExec; the bf16 mode's register kernel is
// prepare_bf16.h.
#pragma once

#include "gdn/chunk/chunk_kernel.h"

namespace gdn {

// G = cumsum(g), Gamma = exp(G), e = exp(G_C - G), D_ij = exp(G_i - G_j) for i >= j and 0
// above the diagonal (where the exponent is positive and could overflow).
// A row with g = -inf forgets the state (docs/design.md §2c): the running sum restarts
// there (G = 0 on that row, seg_ counts such rows), and a decay across it is zero: D_ij = 0
// when rows i and j lie in different segments, Gamma = 0 from the first such row on, and
// e_i = 0 before the last one. Without -inf every row is in segment 0 and these are the
// plain formulas, bit for bit.
// G, seg_ and Gam_ of decay_terms by all the threads: a segmented Hillis-Steele scan,
// log2(C) barrier steps instead of one thread's C. Element i holds, for the rows
// (i - 2 off, i] it has combined, the count of -inf rows and the sum of g since the last
// of them; joining the window before it adds the counts and keeps the right sum alone
// when the right window holds a reset. The sums are grouped differently from the serial
// loop: the same values up to rounding. redC_ and csum_ (free until the backward's end)
// are the ping-pong partners of G_ and seg_.
template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::segmented_scan(const T* g) {
  const int C = C_;
  for (int i = ex_.tid(); i < C; i += ex_.nthreads()) {
    const bool reset = hd::is_minus_inf(g[i]);
    G_[i] = reset ? T(0) : g[i];
    seg_[i] = reset ? T(1) : T(0);
  }
  T *sum = G_, *count = seg_, *next_sum = redC_, *next_count = csum_;
  for (int off = 1; off < C; off *= 2) {
    ex_.sync();
    for (int i = ex_.tid(); i < C; i += ex_.nthreads()) {
      const bool joined = i >= off;
      next_sum[i] = joined && count[i] == T(0) ? sum[i - off] + sum[i] : sum[i];
      next_count[i] = joined ? count[i - off] + count[i] : count[i];
    }
    T* t = sum;
    sum = next_sum, next_sum = t;
    t = count;
    count = next_count, next_count = t;
  }
  ex_.sync();
  for (int i = ex_.tid(); i < C; i += ex_.nthreads()) {
    G_[i] = sum[i];  // a copy onto itself where the steps were even
    seg_[i] = count[i];
    Gam_[i] = count[i] == T(0) ? hd::exp(sum[i]) : T(0);
  }
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::decay_terms(const T* g) {
  const int C = C_;
  if constexpr (Exec::serial) {  // a prefix sum: sequential, C steps
    T acc = 0;
    int seg = 0;
    for (int i = 0; i < C; ++i) {
      if (hd::is_minus_inf(g[i])) {
        acc = 0;
        ++seg;
      } else {
        acc += g[i];
      }
      G_[i] = acc;
      seg_[i] = T(seg);
      Gam_[i] = seg == 0 ? hd::exp(acc) : T(0);
    }
  } else {
    segmented_scan(g);
  }
  ex_.sync();
  for (int i = ex_.tid(); i < C; i += ex_.nthreads())
    e_[i] = seg_[i] == seg_[C - 1] ? hd::exp(G_[C - 1] - G_[i]) : T(0);
  if constexpr (Exec::serial) {  // the same values, in loops the compiler vectorises
    for (int i = 0; i < C; ++i) {
      T* Di = D_ + i * C;
      const T Gi = G_[i], si = seg_[i];
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
      for (int j = 0; j <= i; ++j) {
        const T d = decay_exp(Gi - G_[j]);
        Di[j] = seg_[j] == si ? d : T(0);
      }
      for (int j = i + 1; j < C; ++j) Di[j] = 0;
    }
  } else {
    each2d(C, C, [&](int i, int j) {
      D_[i * C + j] = j <= i && seg_[i] == seg_[j] ? decay_exp(G_[i] - G_[j]) : T(0);
    });
  }
  ex_.sync();
}

// Tinv = (I + L)^{-1} for strictly lower L (n x n, leading dimension ld; Tinv zeroed by
// the caller). Blocked: [A 0; B D]^{-1} = [A^-1 0; -D^-1 B A^-1  D^-1], so all but the
// 16 x 16 diagonal blocks are GEMMs. Bottom-up, as a loop (device code must not recurse):
// first every 16 x 16 diagonal block, then the off-diagonal block of each pair of
// neighbouring blocks of size 16, 32, ... (n is 16 or a power of two above). Each merge reads
// only finished inverses of its two halves, so this is the recursive order's arithmetic,
// entry for entry. tmp holds n x n / 4 elements.
template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::unit_lower_inverse(const T* L, T* Tinv, int n, int ld, T* tmp) {
  if constexpr (Exec::serial) {
    for (int b = 0; b < n; b += 16) {
      const int m = n - b < 16 ? n - b : 16;
      invert_leaf(L + b * ld + b, Tinv + b * ld + b, m, ld);
    }
  } else {
    invert_leaves(L, Tinv, n, ld);
  }
  for (int s = 16; s < n; s *= 2) {
    for (int b = 0; b + s < n; b += 2 * s) {
      const int lo = b + s, m = n - lo < s ? n - lo : s;  // rows of the lower half
      // Tinv_21 = -Tinv_22 (L_21 Tinv_11)
      ex_.gemm(false, false, m, s, s, T(1), L + lo * ld + b, ld, Tinv + b * ld + b, ld, T(0), tmp,
               s);
      ex_.gemm(false, false, m, s, m, T(-1), Tinv + lo * ld + lo, ld, tmp, s, T(0),
               Tinv + lo * ld + b, ld, Structure::kLowerA);
    }
  }
}

// One diagonal block of unit_lower_inverse (n <= 16) by forward substitution,
// T_i = e_i - sum_{j<i} L_ij T_j: rows in order (row i reads rows j < i), the columns c < i
// of a row in parallel (T_jc = 0 for c > j).
// The 16 x 16 diagonal blocks of unit_lower_inverse on a thread group. The blocks are
// independent, so row i of every block is one step: 16 barriers in all instead of 16 per
// block (64 at C = 64). Each entry is invert_leaf's sum, in its order.
template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::invert_leaves(const T* L, T* Tinv, int n, int ld) {
  const int leaves = (n + 15) / 16;
  for (int i = 0; i < 16; ++i) {
    for (int x = ex_.tid(); x < leaves * (i + 1); x += ex_.nthreads()) {
      const int b = (x / (i + 1)) * 16, c = x % (i + 1);
      if (b + i >= n) continue;  // past the last, shorter block
      T* Ti = Tinv + (b + i) * ld + b;
      if (c == i) {
        Ti[i] = 1;
        continue;
      }
      T acc = 0;  // rounded step by step: the GPU's register prepare has the same sums
      for (int j = c; j < i; ++j)
        acc = hd::add_rn(acc, -hd::mul_rn(L[(b + i) * ld + b + j], Tinv[(b + j) * ld + b + c]));
      Ti[c] = acc;
    }
    ex_.sync();
  }
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::invert_leaf(const T* L, T* Tinv, int n, int ld) {
  if (Exec::serial && n == 16) {
    // One thread: row i as a 16-wide vector of partial sums, T_i -= L_ij T_j for j < i,
    // which the compiler keeps in one or two vector registers (the column-by-column dot
    // products below were a serial FMA chain per entry). Column c gets the same terms in
    // the same order j = c, ..., i - 1: the terms j < c are L_ij * 0 (Tinv is zero there,
    // the caller zeroed it), which leave the partial sum unchanged. Row j reads columns up
    // to 15 of the block, all inside it.
    for (int i = 0; i < n; ++i) {
      T acc[16] = {};
      for (int j = 0; j < i; ++j) {
        const T l = L[i * ld + j];
        const T* Tj = Tinv + j * ld;
        for (int c = 0; c < 16; ++c) acc[c] -= l * Tj[c];
      }
      T* Ti = Tinv + i * ld;
      for (int c = 0; c < i; ++c) Ti[c] = acc[c];
      Ti[i] = 1;
    }
    return;
  }
  for (int i = 0; i < n; ++i) {
    T* Ti = Tinv + i * ld;
    for (int c = ex_.tid(); c < i; c += ex_.nthreads()) {
      T acc = 0;
      for (int j = c; j < i; ++j) acc -= L[i * ld + j] * Tinv[j * ld + c];
      Ti[c] = acc;
    }
    if (ex_.tid() == 0) Ti[i] = 1;
    ex_.sync();
  }
}

// L = strict_lower(diag(beta) K K^T .* D), T = (I + L)^{-1}, u = T (beta V),
// w = T (beta Gamma K), k~ = e K, P = lower_incl(Q K^T .* D), q_g = Gamma Q.
// Only the lower triangles of K K^T and Q K^T are made (kLowerC): their upper entries are
// never read, so every use below selects rather than multiplies by D's zeros.
template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::wy(const ChunkRows<T>& r, T* w, T* u, T* kt, T* qg, T* P) {
  const int C = C_, K = K_, V = V_;
  mm(false, true, C, C, K, T(1), r.k, r.k, T(0), KK_, Structure::kLowerC);
  mm(false, true, C, C, K, T(1), r.q, r.k, T(0), QK_, Structure::kLowerC);
  each2d(C, C, [&](int i, int j) {
    const int ij = i * C + j;
    L_[ij] = j < i ? r.beta[i] * KK_[ij] * D_[ij] : T(0);
    P[ij] = j <= i ? QK_[ij] * D_[ij] : T(0);
    Tm_[ij] = 0;
  });
  ex_.sync();
  unit_lower_inverse(L_, Tm_, C, C, tmpCC_);
  each2d(C, V, [&](int i, int d) { bV_[i * V + d] = r.beta[i] * r.v[i * V + d]; });
  each2d(C, K, [&](int i, int d) {
    bGK_[i * K + d] = r.beta[i] * Gam_[i] * r.k[i * K + d];
    kt[i * K + d] = e_[i] * r.k[i * K + d];
    qg[i * K + d] = Gam_[i] * r.q[i * K + d];
  });
  mm(false, false, C, V, C, T(1), Tm_, bV_, T(0), u, Structure::kLowerA);
  // u as the register kernels keep it (gdn/chunk/bf16_factors.h), so that every path's
  // epilogues read the same u. The gemm's barriers order it: every thread is past the
  // last, the next reads no u.
  if (keeps_bf16<T>(ex_))
    each2d(C, V, [&](int i, int d) { u[i * V + d] = kept_as_operand(ex_, u[i * V + d]); });
  mm(false, false, C, K, C, T(1), Tm_, bGK_, T(0), w, Structure::kLowerA);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::prepare(const ChunkRows<T>& rows, T* f) {
  decay_terms(rows.g);
  if (ex_.tid() == 0) *fl_.gamma_at(f) = Gam_[C_ - 1];
  wy(rows, fl_.w(f), fl_.u(f), fl_.kt(f), fl_.qg(f), fl_.P(f));  // ends in a gemm: a barrier
}

}  // namespace gdn
