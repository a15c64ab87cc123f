// The chunked gated delta rule on one chunk of one (batch row, value head)
// (docs/design.md §2 and §2b). Every function works on C contiguous, zero-padded rows:
// the callers gather them from the [B, T, H, D] layouts. Padded rows carry g = 0,
// beta = 0 and zero q, k, v, which makes them an identity map with no output.
//
// One source for the CPU and the GPU: ChunkKernel<T, Exec> is written against an
// execution policy Exec that runs one chunk's math either on one CPU thread (HostExec,
// host_exec.h) or on the threads of one CUDA block (CudaExec, cuda_exec.cuh). Scratch
// comes from a caller-provided workspace so that a CUDA block can use global memory.
#pragma once

#include <cstddef>

#include "core/hd.h"
#include "ops/gdn_chunk/chunk_gemm.h"
#include "ops/gdn_chunk/row_math.h"
#include "ops/gemm/structure.h"

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

// The WY factors of a chunk, stored in one flat block of size() elements: w (C x K),
// k~ (C x K), q_g (C x K), u (C x V), P (C x C), gamma, then padding to a multiple of four
// elements. With K and V multiples of four every matrix then starts 16 bytes into an aligned
// buffer, so the GPU's walks copy them with 16-byte cp.async (gdn/register_walk.h).
template <typename T>
struct ChunkFactors {
  int C, K, V;
  GDN_HD std::size_t size() const { return (matrices() + 1 + 3) / 4 * 4; }
  // Accessors work on const and mutable blocks alike (F is T* or const T*).
  template <typename F>
  GDN_HD F w(F f) const {
    return f;
  }
  template <typename F>
  GDN_HD F kt(F f) const {
    return f + C * K;
  }
  template <typename F>
  GDN_HD F qg(F f) const {
    return f + 2 * C * K;
  }
  template <typename F>
  GDN_HD F u(F f) const {
    return f + 3 * C * K;
  }
  template <typename F>
  GDN_HD F P(F f) const {
    return f + 3 * C * K + C * V;
  }
  template <typename F>
  GDN_HD F gamma_at(F f) const {
    return f + matrices();
  }
  GDN_HD T gamma(const T* f) const { return *gamma_at(f); }

 private:
  GDN_HD std::size_t matrices() const {
    return 3 * std::size_t(C) * K + std::size_t(C) * V + std::size_t(C) * C;
  }
};

// The execution policy of one chunk's math. Every thread of the group calls every
// ChunkKernel function with the same arguments (uniform control flow). An Exec has:
//   static constexpr bool serial   true when nthreads() is 1 (plain nested loops then)
//   tid(), nthreads()              this thread and the group size
//   sync()                         a barrier of the group
//   gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s = Structure::kDense)
//       C = beta C + alpha op(A) op(B), row-major (la::gemm's contract), called by all
//       threads; it is a barrier on entry and on exit, so its inputs written by any
//       thread before the call are read, and its result is visible to all threads after.
//       beta == 0 never reads C. s (ops/gemm/structure.h) names known zeros of op(A) or
//       the unwanted upper triangle of C: an Exec may skip that work or ignore the hint.
// HostExec (host_exec.h) and CudaExec (cuda_exec.cuh) are the two.

// The simple cooperative GEMM: thread tid computes the entries tid, tid + nt, ... of C
// (row-major), each a whole dot product accumulated in Acc. CudaExec uses it; so does the
// CPU test that emulates a block with threads, which is how it is checked without a GPU.
template <typename Acc, typename T>
GDN_HD void block_gemm(int tid, int nt, bool ta, bool tb, int m, int n, int k, T alpha, const T* A,
                       int lda, const T* B, int ldb, T beta, T* C, int ldc) {
  for (int x = tid; x < m * n; x += nt) {
    const int i = x / n, j = x % n;
    Acc acc = 0;
    for (int p = 0; p < k; ++p)
      acc += Acc(ta ? A[p * lda + i] : A[i * lda + p]) * Acc(tb ? B[j * ldb + p] : B[p * ldb + j]);
    T& c = C[i * ldc + j];
    c = (beta == T(0) ? T(0) : beta * c) + alpha * T(acc);
  }
}

// The chunk math of docs/design.md §2 and §2b for one Exec. Cheap to construct (it only carves
// the workspace): make one per thread group and chunk job.
template <typename T, typename Exec>
class ChunkKernel {
 public:
  // Elements of scratch the kernel needs; the workspace must stay valid while it is used.
  GDN_HD static std::size_t workspace_size(int C, int K, int V) {
    const std::size_t CC = std::size_t(C) * C, CK = std::size_t(C) * K, CV = std::size_t(C) * V;
    return 7 * std::size_t(C) + K + 9 * CC + 5 * CK + 4 * CV + ChunkFactors<T>{C, K, V}.size();
  }

  GDN_HD ChunkKernel(int C, int K, int V, T scale, T* workspace, Exec ex = Exec())
      : ex_(ex), C_(C), K_(K), V_(V), s_(scale), fl_{C, K, V} {
    const std::size_t CC = std::size_t(C) * C, CK = std::size_t(C) * K, CV = std::size_t(C) * V;
    T* p = workspace;
    auto take = [&p](std::size_t n) {  // null stays null: only the *_cols forms may run then
      T* r = p;
      if (p) p += n;
      return r;
    };
    G_ = take(C), Gam_ = take(C), e_ = take(C), dGam_ = take(C), redC_ = take(C), redK_ = take(K);
    seg_ = take(C), csum_ = take(C);
    D_ = take(CC), KK_ = take(CC), QK_ = take(CC), L_ = take(CC), Tm_ = take(CC);
    dP_ = take(CC), dD_ = take(CC), tmpCC_ = take(CC), dL_ = take(CC);
    bGK_ = take(CK), tmpCK_ = take(CK), dkt_ = take(CK), X_ = take(CK), dKb_ = take(CK);
    bV_ = take(CV), vnew_ = take(CV), dvn_ = take(CV), dVb_ = take(CV);
    f_ = take(fl_.size());
  }

  GDN_HD const ChunkFactors<T>& layout() const { return fl_; }

  // WY factors of one chunk into f (layout().size() elements).
  GDN_HD void prepare(const ChunkRows<T>& rows, T* f);
  // h (K x V) <- gamma h + k~^T (u - w h); o (C x V) = s (q_g h + P (u - w h)) if o != null.
  GDN_HD void step(const T* f, T* h, T* o);
  // o (C x V) = s (q_g h + P (u - w h)), h unchanged: step's outputs without its state
  // update (its first three GEMM calls, so the same bits as step's o). The GPU's output pass
  // walks the states alone and then makes every chunk's outputs from its entry state at once.
  GDN_HD void outputs(const T* f, const T* h, T* o);
  // M (K x K) <- gamma M - k~^T (w M): the low-rank transition update, 2 K^2 C flops.
  GDN_HD void compose(const T* f, T* M);
  // mu (K x V) <- M_c^T mu + A_c^T dO: the adjoint of the chunk's entry state.
  GDN_HD void adjoint(const T* f, T* mu, const T* dO);
  // Full backward of one chunk. h: state entering the chunk; dh: on entry the adjoint of
  // the state leaving it, on return the adjoint of the state entering it.
  GDN_HD void backward(const ChunkRows<T>& rows, const T* h, const T* dO, T* dh,
                       const ChunkRowGrads<T>& out);

  // Column tiles of the three sequential steps. The state's columns never mix: column j of
  // h_next (of mu, of M's update) reads column j of h (mu, M), of u and of dO only, and
  // w, k~, q_g, P, gamma, which every column shares. So step, adjoint and compose split
  // over column tiles [c0, c0 + n) of the state, which is how the GPU spreads one (batch,
  // head)'s sequential walk over several blocks (local_pass_cuda.cu). The tile pointers
  // (h, mu, M; o, dO) point at the tile's first column with their own leading dimensions;
  // scratch is C x n elements (dense, leading dimension n), which these forms use instead
  // of the workspace (a ChunkKernel made with a null workspace may call them). The
  // full-width step, adjoint and compose are these with c0 = 0, n = V (K for compose) and
  // the kernel's own scratch: the same GEMM calls with the same arguments, so the same bits.
  //   step_cols:    h (K x n) <- gamma h + k~^T (u_tile - w h); o (C x n) = s (q_g h + P v_new)
  //   compose_cols: M (K x n) <- gamma M - k~^T (w M)
  //   adjoint_cols: mu (K x n) <- gamma mu + s q_g^T dO - w^T (k~ mu + s P^T dO)
  GDN_HD void step_cols(const T* f, int c0, int n, T* h, int ldh, T* o, int ldo, T* scratch);
  GDN_HD void compose_cols(const T* f, int n, T* M, int ldm, T* scratch);
  GDN_HD void adjoint_cols(const T* f, int n, T* mu, int ldmu, const T* dO, int lddo, T* scratch);

 private:
  GDN_HD void decay_terms(const T* g);     // G, Gamma, e, masked D
  GDN_HD void segmented_scan(const T* g);  // decay_terms' prefix sums, on every thread
  GDN_HD void wy(const ChunkRows<T>& rows, T* w, T* u, T* kt, T* qg, T* P);
  GDN_HD void unit_lower_inverse(const T* L, T* Tinv, int n, int ld, T* tmp);
  GDN_HD void invert_leaf(const T* L, T* Tinv, int n, int ld);
  GDN_HD void invert_leaves(const T* L, T* Tinv, int n, int ld);

  // Dense, tightly packed operands (la::matmul's contract).
  GDN_HD void mm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, const T* B, T beta,
                 T* C, Structure s = Structure::kDense) {
    ex_.gemm(ta, tb, m, n, k, alpha, A, ta ? m : k, B, tb ? k : n, beta, C, n, s);
  }
  // f(i, j) for every cell of an m x n grid, split over the threads. A serial Exec keeps
  // the nested loops (no index division in the hot path of the CPU build).
  template <typename F>
  GDN_HD void each2d(int m, int n, F f) {
    if constexpr (Exec::serial) {
      // Every f passed here writes only cell (i, j) of its outputs and reads no output cell
      // of another (i, j): the inner loop has no carried dependency, which GCC cannot prove
      // through the captured pointers; ivdep lets it vectorise.
      for (int i = 0; i < m; ++i)
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
        for (int j = 0; j < n; ++j) f(i, j);
    } else {
      for (int x = ex_.tid(); x < m * n; x += ex_.nthreads()) f(x / n, x % n);
    }
  }

  Exec ex_;
  int C_, K_, V_;
  T s_;
  ChunkFactors<T> fl_;
  // Scratch carved from the workspace (sizes in the constructor). redC_, redK_ hold
  // per-row partial sums that one thread then adds up in a fixed order.
  T *G_, *Gam_, *e_, *dGam_, *redC_, *redK_, *seg_, *csum_;
  T *D_, *KK_, *QK_, *L_, *Tm_, *dP_, *dD_, *tmpCC_, *dL_;
  T *bGK_, *tmpCK_, *dkt_, *X_, *dKb_, *bV_, *vnew_, *dvn_, *dVb_, *f_;
};

// ---- ChunkKernel bodies (templates: the CUDA build instantiates them for CudaExec) ----

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
  mm(false, false, C, K, C, T(1), Tm_, bGK_, T(0), w, Structure::kLowerA);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::prepare(const ChunkRows<T>& rows, T* f) {
  decay_terms(rows.g);
  if (ex_.tid() == 0) *fl_.gamma_at(f) = Gam_[C_ - 1];
  wy(rows, fl_.w(f), fl_.u(f), fl_.kt(f), fl_.qg(f), fl_.P(f));  // ends in a gemm: a barrier
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::step(const T* f, T* h, T* o) {
  step_cols(f, 0, V_, h, V_, o, V_, vnew_);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::outputs(const T* f, const T* h, T* o) {
  const int C = C_, K = K_, V = V_;
  const T* u = fl_.u(f);
  for (int x = ex_.tid(); x < C * V; x += ex_.nthreads()) vnew_[x] = u[x];
  ex_.gemm(false, false, C, V, K, T(-1), fl_.w(f), K, h, V, T(1), vnew_, V);  // u - w h
  ex_.gemm(false, false, C, V, K, s_, fl_.qg(f), K, h, V, T(0), o, V);
  ex_.gemm(false, false, C, V, C, s_, fl_.P(f), C, vnew_, V, T(1), o, V, Structure::kLowerA);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::compose(const T* f, T* M) {
  compose_cols(f, K_, M, K_, tmpCK_);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::adjoint(const T* f, T* mu, const T* dO) {
  adjoint_cols(f, V_, mu, V_, dO, V_, dvn_);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::step_cols(const T* f, int c0, int n, T* h, int ldh, T* o, int ldo,
                                            T* vnew) {
  const int C = C_, K = K_, V = V_;
  const T* u = fl_.u(f) + c0;
  if (n == V) {  // the whole width: one flat copy (the full-width step's loop)
    for (int x = ex_.tid(); x < C * V; x += ex_.nthreads()) vnew[x] = u[x];
  } else {
    each2d(C, n, [&](int i, int d) { vnew[i * n + d] = u[i * V + d]; });
  }
  ex_.gemm(false, false, C, n, K, T(-1), fl_.w(f), K, h, ldh, T(1), vnew, n);  // u - w h
  if (o) {
    ex_.gemm(false, false, C, n, K, s_, fl_.qg(f), K, h, ldh, T(0), o, ldo);
    ex_.gemm(false, false, C, n, C, s_, fl_.P(f), C, vnew, n, T(1), o, ldo, Structure::kLowerA);
  }
  ex_.gemm(true, false, K, n, C, T(1), fl_.kt(f), K, vnew, n, fl_.gamma(f), h, ldh);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::compose_cols(const T* f, int n, T* M, int ldm, T* wm) {
  const int C = C_, K = K_;
  ex_.gemm(false, false, C, n, K, T(1), fl_.w(f), K, M, ldm, T(0), wm, n);  // w M
  ex_.gemm(true, false, K, n, C, T(-1), fl_.kt(f), K, wm, n, fl_.gamma(f), M, ldm);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::adjoint_cols(const T* f, int n, T* mu, int ldmu, const T* dO,
                                               int lddo, T* dvn) {
  const int C = C_, K = K_;
  // dv_new = k~ mu + s P^T dO;  mu <- gamma mu + s q_g^T dO - w^T dv_new
  ex_.gemm(false, false, C, n, K, T(1), fl_.kt(f), K, mu, ldmu, T(0), dvn, n);
  ex_.gemm(true, false, C, n, C, s_, fl_.P(f), C, dO, lddo, T(1), dvn, n, Structure::kUpperA);
  ex_.gemm(true, false, K, n, C, s_, fl_.qg(f), K, dO, lddo, fl_.gamma(f), mu, ldmu);
  ex_.gemm(true, false, K, n, C, T(-1), fl_.w(f), K, dvn, n, T(1), mu, ldmu);
}

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
