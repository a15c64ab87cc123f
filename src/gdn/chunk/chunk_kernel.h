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
#include <type_traits>

#include "core/bf16.h"
#include "core/hd.h"
#include "gdn/chunk/chunk_gemm.h"
#include "gdn/chunk/row_math.h"
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
// buffer, so the GPU's walks copy them with 16-byte cp.async (gdn/chunk/bf16_walk.h).
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
//   bf16_operands() (optional)     true where gemm rounds its operands to bf16 (the bf16
//       mode): prepare then rounds u too, and the walks the states they keep
//       (keeps_bf16 below).
// HostExec (host_exec.h) and CudaExec (cuda_exec.cuh) are the two.

// Whether values that only reach mma operands are kept in bf16: where ex's GEMMs round
// their operands to bf16 (an Exec's optional bf16_operands(): the bf16 mode), never in
// fp64. kept_as_operand(ex, x) is x as the bf16 mode keeps it then (rounded once: the value
// the register kernels store, so that every path reads the same one), x itself otherwise.
template <typename T, typename Exec>
GDN_HD bool keeps_bf16(const Exec& ex) {
  if constexpr (std::is_same_v<T, float> && requires { ex.bf16_operands(); })
    return ex.bf16_operands();
  else
    return false;
}
template <typename T, typename Exec>
GDN_HD T kept_as_operand(const Exec& ex, T x) {
  if constexpr (std::is_same_v<T, float>)
    if (keeps_bf16<T>(ex)) return to_float(to_bf16(x));
  return x;
}

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

}  // namespace gdn
