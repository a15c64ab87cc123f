// Dense per-token layers: linear, embedding, RMSNorm, gated RMSNorm, SwiGLU, cross-entropy.
// Determinism: every OpenMP loop uses a static schedule over work units whose size does not
// depend on the thread count, and every reduction over rows runs in a fixed order inside
// one unit, so results are bit-identical for any OMP_NUM_THREADS.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "gdn/linalg.h"
#include "model/ops.h"

namespace gdn::ops {

namespace {

using i64 = std::int64_t;

// GEMM tiles. The micro-kernel keeps a 4-row x one-vector tile of C in registers over the
// reduction and streams the matching column strip of B, so B is packed into strips of one
// vector width (kb x L contiguous: no power-of-two strides that alias in L1) and each strip
// is swept over a whole row block while it sits in L1. Rounding depends on these constants
// (the k blocks are summed into C one after another), never on the thread count.
constexpr int kRows = 128;   // rows of C per parallel work unit (A block: kRows x kDepth)
constexpr int kDepth = 256;  // reduction length per micro-kernel call
constexpr int kTileO = 256;  // dW rows per work unit
constexpr int kTileI = 128;  // dW columns per work unit
// Column chunk for reductions over rows that are split by column (dW of norms, dE).
constexpr int kColChunk = 64;

// op(B) is packed in panels of at most kPanelDepth x kPanelCols, which bounds the scratch
// (a tied LM head has k or n = vocab). Both are multiples of kDepth and of any vector
// width, so the panels change neither the strips nor the order of the sums.
constexpr int kPanelCols = 2048;
constexpr int kPanelDepth = 2048;

template <typename T>
constexpr int kL = la::detail::kLanes<T>;

// Packs strip s0 / L of rows [p0, p0 + k) x columns [j0, j0 + n) of op(B) (B is
// [n_total, ldb] holding op(B)^T when trans): the k rows of columns [s0, s0 + w) (w = L, or
// the tail) contiguously at P + s0 k. A whole panel is the strips s0 = 0, L, 2L, ...
template <typename T>
void pack_strip(const T* B, i64 ldb, bool trans, i64 p0, int k, i64 j0, int n, int s0, T* P) {
  const int w = std::min(kL<T>, n - s0);
  T* dst = P + i64(s0) * k;
  for (int p = 0; p < k; ++p)
    for (int j = 0; j < w; ++j)
      dst[i64(p) * w + j] =
          trans ? B[(j0 + s0 + j) * ldb + p0 + p] : B[(p0 + p) * ldb + j0 + s0 + j];
}

// C[N, n] = A[N, k] op(B), all row-major and packed; op(B) given as B (see pack_strip).
// Per panel of op(B): pack it, then run the row blocks in parallel; each row block sums
// its kDepth blocks into C in order (the first one overwrites C).
template <typename T>
void gemm_rows(const T* A, const T* B, bool trans, i64 N, int k, int n, T* C) {
  constexpr int L = kL<T>;
  if (k == 0) {
    std::fill(C, C + N * n, T(0));
    return;
  }
  const i64 ldb = trans ? k : n;
  std::vector<T> P(std::size_t(std::min(k, kPanelDepth)) * std::min(n, kPanelCols));
  const i64 blocks = (N + kRows - 1) / kRows;
  for (int j0 = 0; j0 < n; j0 += kPanelCols) {
    const int nc = std::min(kPanelCols, n - j0);
    for (int p0 = 0; p0 < k; p0 += kPanelDepth) {
      const int kc = std::min(kPanelDepth, k - p0);
#pragma omp parallel
      {
        const int strips = (nc + L - 1) / L;
#pragma omp for schedule(static)
        for (int s = 0; s < strips; ++s) pack_strip(B, ldb, trans, p0, kc, j0, nc, s * L, P.data());
#pragma omp for schedule(static)
        for (i64 rb = 0; rb < blocks; ++rb) {
          const i64 r0 = rb * kRows;
          const int m = int(std::min<i64>(kRows, N - r0));
          for (int k0 = 0; k0 < kc; k0 += kDepth) {
            const int kb = std::min(kDepth, kc - k0);
            for (int s0 = 0; s0 < nc; s0 += L) {
              const int w = std::min(L, nc - s0);
              la::gemm(false, false, m, w, kb, T(1), A + r0 * k + p0 + k0, k,
                       P.data() + i64(s0) * kc + i64(k0) * w, w, p0 + k0 == 0 ? T(0) : T(1),
                       C + r0 * n + j0 + s0, n);
            }
          }
        }
      }
    }
  }
}

// Chunks of d columns: the unit of column-parallel reductions over rows.
inline int col_chunks(int d) {
  return (d + kColChunk - 1) / kColChunk;
}

template <typename T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// 1 / sqrt(mean(x^2) + eps) of one row, accumulated in double.
template <typename T>
inline double inv_rms(const T* x, int d, double eps) {
  double s = 0;
  for (int j = 0; j < d; ++j) s += double(x[j]) * double(x[j]);
  return 1.0 / std::sqrt(s / d + eps);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Linear

template <typename T>
void linear_forward(const T* x, const T* W, i64 N, int in, int out, T* y) {
  gemm_rows(x, W, /*trans=*/true, N, in, out, y);  // op(B) = W^T [in, out]
}

template <typename T>
void linear_backward(const T* x, const T* W, const T* dy, i64 N, int in, int out, T* dx, T* dW) {
  if (dx) gemm_rows(dy, W, /*trans=*/false, N, out, in, dx);  // dx = dy W, W is [out, in]
  if (!dW) return;
  // dW += dy^T x, a reduction over N. Each tile of dW is owned by one work unit that sums
  // all N rows in a fixed order into scratch, then adds it to dW once (so dW += G exactly
  // and a second call adds the identical G).
  constexpr int L = kL<T>;
  const int to = (out + kTileO - 1) / kTileO, ti = (in + kTileI - 1) / kTileI;
#pragma omp parallel
  {
    // Scratch sized to the problem, not the tile: small layers call this often.
    const std::size_t to_rows = std::min(kTileO, out), ti_cols = std::min(kTileI, in),
                      depth = std::size_t(std::min<i64>(kDepth, N));
    std::vector<T> G(to_rows * ti_cols), Ap(depth * to_rows), Bp(depth * ti_cols);
#pragma omp for schedule(static)
    for (int t = 0; t < to * ti; ++t) {
      const int o0 = (t / ti) * kTileO, i0 = (t % ti) * kTileI;
      const int m = std::min(kTileO, out - o0), nb = std::min(kTileI, in - i0);
      std::fill(G.begin(), G.end(), T(0));
      for (i64 k0 = 0; k0 < N; k0 += kDepth) {
        const int kb = int(std::min<i64>(kDepth, N - k0));
        // dy^T block packed as [kb, m] rows (the micro-kernel's transposed-A layout) and
        // the x block in strips: both contiguous, whatever out and in are.
        for (int p = 0; p < kb; ++p)
          std::copy_n(dy + (k0 + p) * out + o0, m, &Ap[std::size_t(p) * m]);
        for (int s0 = 0; s0 < nb; s0 += L)
          pack_strip(x, in, /*trans=*/false, k0, kb, i0, nb, s0, Bp.data());
        for (int s0 = 0; s0 < nb; s0 += L) {
          const int w = std::min(L, nb - s0);
          la::gemm(true, false, m, w, kb, T(1), Ap.data(), m, Bp.data() + i64(s0) * kb, w, T(1),
                   G.data() + s0, nb);
        }
      }
      for (int r = 0; r < m; ++r) {
        T* d = dW + i64(o0 + r) * in + i0;
        const T* g = G.data() + std::size_t(r) * nb;
        for (int c = 0; c < nb; ++c) d[c] += g[c];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Embedding

namespace {
void check_tokens(const std::int32_t* tokens, i64 N, int vocab) {
  for (i64 i = 0; i < N; ++i)
    GDN_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "token id ", tokens[i], " at row ", i,
              " is out of range [0, ", vocab, ")");
}
}  // namespace

template <typename T>
void embedding_forward(const std::int32_t* tokens, const T* E, i64 N, int vocab, int d, T* y) {
  check_tokens(tokens, N, vocab);  // before the parallel region: exceptions cannot leave it
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) std::copy_n(E + i64(tokens[i]) * d, d, y + i * d);
}

template <typename T>
void embedding_backward(const std::int32_t* tokens, const T* dy, i64 N, int vocab, int d, T* dE) {
  check_tokens(tokens, N, vocab);
  // Repeated tokens add into the same row: split by columns, each chunk walks all tokens
  // in order, so there are no races and the summation order is fixed.
  const int chunks = col_chunks(d);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    const int c0 = ch * kColChunk, c1 = std::min(d, c0 + kColChunk);
    for (i64 i = 0; i < N; ++i) {
      T* e = dE + i64(tokens[i]) * d;
      const T* g = dy + i * d;
      for (int c = c0; c < c1; ++c) e[c] += g[c];
    }
  }
}

// ---------------------------------------------------------------------------------------
// RMSNorm (Qwen3-Next: scale 1 + w)

template <typename T>
void rmsnorm_forward(const T* x, const T* w, i64 N, int d, double eps, T* y) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) {
    const T* xi = x + i * d;
    const double r = inv_rms(xi, d, eps);
    for (int j = 0; j < d; ++j) y[i * d + j] = T(double(xi[j]) * r * (1.0 + double(w[j])));
  }
}

template <typename T>
void rmsnorm_backward(const T* x, const T* w, const T* dy, i64 N, int d, double eps, T* dx, T* dw) {
  // y_j = x_j r s_j, r = (mean(x^2) + eps)^-1/2, s = 1 + w:
  // dx_i = r s_i dy_i - r^3 / d * x_i * sum_j dy_j s_j x_j;  dw_j += sum_rows dy_j x_j r.
  std::vector<double> rs(static_cast<std::size_t>(N));
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) {
    const T *xi = x + i * d, *gi = dy + i * d;
    const double r = inv_rms(xi, d, eps);
    rs[std::size_t(i)] = r;
    if (!dx) continue;
    double dot = 0;
    for (int j = 0; j < d; ++j) dot += double(gi[j]) * (1.0 + double(w[j])) * double(xi[j]);
    const double c = r * r * r / d * dot;
    for (int j = 0; j < d; ++j)
      dx[i * d + j] = T(r * (1.0 + double(w[j])) * double(gi[j]) - c * double(xi[j]));
  }
  if (!dw) return;
  const int chunks = col_chunks(d);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    const int c0 = ch * kColChunk, c1 = std::min(d, c0 + kColChunk);
    double acc[kColChunk] = {};
    for (i64 i = 0; i < N; ++i)
      for (int c = c0; c < c1; ++c)
        acc[c - c0] += double(dy[i * d + c]) * double(x[i * d + c]) * rs[std::size_t(i)];
    for (int c = c0; c < c1; ++c) dw[c] += T(acc[c - c0]);
  }
}

// ---------------------------------------------------------------------------------------
// Gated RMSNorm: y = x r w silu(z)

template <typename T>
void gated_rmsnorm_forward(const T* x, const T* z, const T* w, i64 N, int d, double eps, T* y) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) {
    const T* xi = x + i * d;
    const double r = inv_rms(xi, d, eps);
    for (int j = 0; j < d; ++j) {
      const double zj = z[i * d + j];
      const double silu = zj * sigmoid(zj);
      y[i * d + j] = T(double(xi[j]) * r * double(w[j]) * silu);
    }
  }
}

template <typename T>
void gated_rmsnorm_backward(const T* x, const T* z, const T* w, const T* dy, i64 N, int d,
                            double eps, T* dx, T* dz, T* dw) {
  // With s_j = w_j silu(z_j): dx as in rmsnorm with s; dz_j = dy_j x_j r w_j silu'(z_j),
  // silu'(z) = sig(z) (1 + z (1 - sig(z))); dw_j += sum_rows dy_j x_j r silu(z_j).
  std::vector<double> rs(static_cast<std::size_t>(N));
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) {
    const T *xi = x + i * d, *zi = z + i * d, *gi = dy + i * d;
    const double r = inv_rms(xi, d, eps);
    rs[std::size_t(i)] = r;
    double dot = 0;
    for (int j = 0; j < d; ++j) {
      const double zj = zi[j], sg = sigmoid(zj);
      const double s = double(w[j]) * zj * sg;
      dot += double(gi[j]) * s * double(xi[j]);
      if (dz)
        dz[i * d + j] =
            T(double(gi[j]) * double(xi[j]) * r * double(w[j]) * sg * (1.0 + zj * (1.0 - sg)));
    }
    if (!dx) continue;
    const double c = r * r * r / d * dot;
    for (int j = 0; j < d; ++j) {
      const double zj = zi[j], s = double(w[j]) * zj * sigmoid(zj);
      dx[i * d + j] = T(r * s * double(gi[j]) - c * double(xi[j]));
    }
  }
  if (!dw) return;
  const int chunks = col_chunks(d);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    const int c0 = ch * kColChunk, c1 = std::min(d, c0 + kColChunk);
    double acc[kColChunk] = {};
    for (i64 i = 0; i < N; ++i)
      for (int c = c0; c < c1; ++c) {
        const double zc = z[i * d + c];
        acc[c - c0] +=
            double(dy[i * d + c]) * double(x[i * d + c]) * rs[std::size_t(i)] * zc * sigmoid(zc);
      }
    for (int c = c0; c < c1; ++c) dw[c] += T(acc[c - c0]);
  }
}

// ---------------------------------------------------------------------------------------
// SwiGLU: y = silu(g) u

template <typename T>
void swiglu_forward(const T* g, const T* u, i64 n, T* y) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < n; ++i) y[i] = g[i] * sigmoid(g[i]) * u[i];
}

template <typename T>
void swiglu_backward(const T* g, const T* u, const T* dy, i64 n, T* dg, T* du) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < n; ++i) {
    const T sg = sigmoid(g[i]);
    if (dg) dg[i] = dy[i] * u[i] * sg * (T(1) + g[i] * (T(1) - sg));
    if (du) du[i] = dy[i] * g[i] * sg;
  }
}

// ---------------------------------------------------------------------------------------
// Cross-entropy

template <typename T>
double cross_entropy(const T* logits, const std::int32_t* targets, i64 N, int V, double grad_scale,
                     T* dlogits) {
  for (i64 i = 0; i < N; ++i)
    GDN_CHECK(targets[i] >= 0 && targets[i] < V, "cross_entropy: target ", targets[i], " at row ",
              i, " is out of range [0, ", V, ")");
  // Per-row losses summed serially afterwards: the total does not depend on the threads.
  std::vector<double> row_loss(static_cast<std::size_t>(N));
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) {
    const T* l = logits + i * V;
    double mx = -INFINITY;
    for (int j = 0; j < V; ++j) mx = std::max(mx, double(l[j]));
    double s = 0;
    for (int j = 0; j < V; ++j) s += std::exp(double(l[j]) - mx);
    const double lse = mx + std::log(s);
    const int t = targets[i];
    row_loss[std::size_t(i)] = lse - double(l[t]);
    if (!dlogits) continue;
    T* dl = dlogits + i * V;
    for (int j = 0; j < V; ++j) dl[j] = T(std::exp(double(l[j]) - lse) * grad_scale);
    dl[t] = T(double(dl[t]) - grad_scale);
  }
  double total = 0;
  for (double v : row_loss) total += v;
  return total;
}

// ---------------------------------------------------------------------------------------

#define GDN_OPS_DENSE_INSTANTIATE(T)                                                          \
  template void linear_forward<T>(const T*, const T*, i64, int, int, T*);                     \
  template void linear_backward<T>(const T*, const T*, const T*, i64, int, int, T*, T*);      \
  template void embedding_forward<T>(const std::int32_t*, const T*, i64, int, int, T*);       \
  template void embedding_backward<T>(const std::int32_t*, const T*, i64, int, int, T*);      \
  template void rmsnorm_forward<T>(const T*, const T*, i64, int, double, T*);                 \
  template void rmsnorm_backward<T>(const T*, const T*, const T*, i64, int, double, T*, T*);  \
  template void gated_rmsnorm_forward<T>(const T*, const T*, const T*, i64, int, double, T*); \
  template void gated_rmsnorm_backward<T>(const T*, const T*, const T*, const T*, i64, int,   \
                                          double, T*, T*, T*);                                \
  template void swiglu_forward<T>(const T*, const T*, i64, T*);                               \
  template void swiglu_backward<T>(const T*, const T*, const T*, i64, T*, T*);                \
  template double cross_entropy<T>(const T*, const std::int32_t*, i64, int, double, T*);

GDN_OPS_DENSE_INSTANTIATE(float)
GDN_OPS_DENSE_INSTANTIATE(double)

}  // namespace gdn::ops
