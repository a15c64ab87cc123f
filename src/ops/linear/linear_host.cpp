// Linear on the host: a packed, register-blocked GEMM over row blocks (ops/gemm/gemm.h),
// bit-identical for any OMP_NUM_THREADS (rounding depends on the tile constants only).
// In the bf16 mode (core/precision.h) both operands are converted to bf16 where they are
// packed or copied, and the GEMM is a bf16 x bf16 matmul with float sums (la::gemm_bf16:
// vdpbf16ps where the CPU has it), the numerics of AMX and of tensor cores.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/profile.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_path.h"
#include "ops/gemm/transpose.h"
#include "ops/host_util.h"
#include "ops/linear/linear.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

namespace {

// GEMM tiles. la::gemm keeps a tile of 6 (AVX2) or 8 (AVX-512) rows x two vectors of C in
// registers over the reduction and streams the matching column strip of B, so B is packed
// into strips of two vector widths (kb x L contiguous: no power-of-two strides that alias
// in L1) and each strip is swept over a whole row block while it sits in L1. Rounding
// depends on kDepth (the k blocks are summed into C one after another), never on the
// thread count, the row block, the strip width or the GEMM path (gemm_path.h).
constexpr int kRows = 120;   // rows of C per block of a thread's share: whole tiles of 6 and of 8
constexpr int kDepth = 256;  // reduction length per micro-kernel call

// op(B) is packed in panels of at most kPanelDepth x kPanelCols, which bounds the scratch
// (a tied LM head has k or n = vocab). Both are multiples of kDepth and of any vector
// width, so the panels change neither the strips nor the order of the sums.
constexpr int kPanelCols = 2048;
constexpr int kPanelDepth = 2048;
// The most bytes of A's copy (the bf16 mode's operand forms) a call makes at once: a longer
// A runs a block of rows at a time. The copy's buffer is kept per thread (operand_rows),
// so without a bound the LM head's N x vocab output gradient would set its size for the
// rest of the run.
constexpr i64 kCopyBytes = i64(32) << 20;

// How the micro-kernel reads the operands. In the bf16 mode a float GEMM follows
// la::gemm_bf16's rule (each pair of k added odd element first), on any path and for the
// same bits: kPairs hands bf16 pairs to la::gemm_bf16 (vdpbf16ps), kSwapped hands the same
// values widened to float, each pair's two elements swapped, to the float GEMM (the AVX2 and
// AVX-512F paths: float speed, with no widening per call). Both pad k to even with a zero
// pair. Double in the bf16 mode rounds its values (kRounded).
enum class Form { kPlain, kRounded, kSwapped, kPairs };

template <typename T, typename E>
struct Operands {
  Form form;
  int padded(int k) const {
    return form == Form::kSwapped || form == Form::kPairs ? (k + 1) / 2 * 2 : k;
  }
};

// x as a bf16 GEMM operand (la::bf16_operand), as bits or as a float; x rounded to bf16.
inline std::uint32_t operand_bits(float x) {
  return la::bf16_operand(x).bits;
}
inline float operand_float(float x) {
  return to_float(la::bf16_operand(x));
}
template <typename T>
T rounded(T x) {
  return T(round_bf16(x));
}

// Scratch that is written before it is read: uninitialised (a zeroed std::vector would
// memset every packing buffer, ~1000 of them a step).
template <typename T>
std::unique_ptr<T[]> scratch(std::size_t n) {
  return std::unique_ptr<T[]>(new T[n]);
}

// Packs strip s0 of rows [p0, p0 + k) x columns [j0, j0 + n) of op(B) (B is [n_total, ldb]
// holding op(B)^T when trans): columns [s0, s0 + w) (w the strip width, or the tail) at
// P + s0 padded(k): padded(k) rows of w (kPairs: pair-rows of w dwords, each the bf16 of
// rows 2q (low half) and 2q + 1). A whole panel is the strips s0 = 0, L, 2L, ...
template <typename T, typename E>
void pack_strip(const Operands<T, E>& op, const T* B, i64 ldb, bool trans, i64 p0, int k, i64 j0,
                int n, int s0, int strip, E* P) {
  const int w = std::min(strip, n - s0), kp = op.padded(k);
  E* dst = P + i64(s0) * kp;
  if constexpr (std::is_same_v<E, Bf16>) {
    std::uint32_t* d = reinterpret_cast<std::uint32_t*>(dst);
    if (trans) {  // B's row j holds column j's pairs side by side: a transpose of dwords
      thread_local std::vector<std::uint32_t> rows;
      rows.resize(std::size_t(w) * (kp / 2));
      for (int j = 0; j < w; ++j) {
        const T* src = B + (j0 + s0 + j) * ldb + p0;
        std::uint32_t* r = rows.data() + i64(j) * (kp / 2);
        for (int q = 0; q < k / 2; ++q)
          r[q] = operand_bits(src[2 * q]) | operand_bits(src[2 * q + 1]) << 16;
        if (k % 2) r[k / 2] = operand_bits(src[k - 1]);
      }
      // Bits moved as floats by the vector transpose: moves only, every pattern kept.
      la::transpose<float>(w, kp / 2, reinterpret_cast<const float*>(rows.data()), kp / 2,
                           reinterpret_cast<float*>(d), w);
    } else {
      for (int q = 0; q < kp / 2; ++q) {
        const T* lo = B + (p0 + 2 * q) * ldb + j0 + s0;
        if (2 * q + 1 < k)
          for (int j = 0; j < w; ++j)
            d[i64(q) * w + j] = operand_bits(lo[j]) | operand_bits(lo[j + ldb]) << 16;
        else
          for (int j = 0; j < w; ++j) d[i64(q) * w + j] = operand_bits(lo[j]);
      }
    }
    return;
  } else {
    if (trans)  // row j0 + s0 + j of B, read along, is column j: a transpose of w rows of k
      la::transpose<T>(w, k, B + (j0 + s0) * ldb + p0, ldb, dst, w);
    else if (op.form == Form::kPlain)
      for (int p = 0; p < k; ++p) std::copy_n(B + (p0 + p) * ldb + j0 + s0, w, dst + i64(p) * w);
    else
      for (int p = 0; p < k; ++p)
        for (int j = 0; j < w; ++j) dst[i64(p) * w + j] = B[(p0 + p) * ldb + j0 + s0 + j];
    if (op.form == Form::kRounded)
      for (i64 e = 0; e < i64(k) * w; ++e) dst[e] = rounded(dst[e]);
    if constexpr (std::is_same_v<T, float>)
      if (op.form == Form::kSwapped) {
        if (k % 2) std::fill(dst + i64(k) * w, dst + i64(kp) * w, 0.0f);
        for (int p = 0; p < kp; p += 2)
          for (int j = 0; j < w; ++j) {
            const float lo = dst[i64(p) * w + j], hi = dst[i64(p + 1) * w + j];
            dst[i64(p) * w + j] = operand_float(hi);
            dst[i64(p + 1) * w + j] = operand_float(lo);
          }
      }
  }
}

// A [N, k] as the micro-kernel reads it (row stride padded(k)): A itself, or a copy in E
// (the Form's values and order, padded), valid until the calling thread's next call. The
// copy's buffer is kept: a fresh one per call cost ~5% of a backward in page faults.
template <typename T, typename E>
const E* operand_rows(const Operands<T, E>& op, const T* A, i64 N, int k) {
  if constexpr (std::is_same_v<E, T>)
    if (op.form == Form::kPlain) return A;
  const int kp = op.padded(k);
  thread_local std::vector<E> copy;
  if (copy.size() < std::size_t(N) * kp) copy.resize(std::size_t(N) * kp);
  E* out = copy.data();
#pragma omp parallel for schedule(static)
  for (i64 r = 0; r < N; ++r) {
    const T* a = A + r * k;
    E* c = out + r * kp;
    if constexpr (std::is_same_v<E, Bf16>) {
      for (int p = 0; p < k; ++p) c[p] = Bf16{std::uint16_t(operand_bits(a[p]))};
      if (k % 2) c[k] = Bf16{};
    } else if (op.form == Form::kRounded) {
      for (int p = 0; p < k; ++p) c[p] = rounded(a[p]);
    } else if constexpr (std::is_same_v<T, float>) {  // kSwapped
      for (int p = 0; p + 1 < k; p += 2) {
        c[p] = operand_float(a[p + 1]);
        c[p + 1] = operand_float(a[p]);
      }
      if (k % 2) {
        c[k - 1] = 0.0f;
        c[k] = operand_float(a[k - 1]);
      }
    }
  }
  return out;
}

// C[m x w] (row stride ldc) = beta C + A[m x kb] P[kb x w], A of row stride lda, P the
// strip (w columns; pair-rows of w dwords for bf16); kb padded to even for pairs.
template <typename T, typename E>
void micro(const Operands<T, E>& op, int m, int w, int kb, const E* A, i64 lda, const E* P, T beta,
           T* C, i64 ldc) {
  if constexpr (std::is_same_v<E, Bf16>)
    la::gemm_bf16(m, w, op.padded(kb), A, int(lda), P, 2 * w, beta, C, int(ldc));
  else
    la::gemm(false, false, m, w, op.padded(kb), T(1), A, int(lda), P, w, beta, C, int(ldc));
}

// C[N, n] = A[N, k] op(B) (C += A op(B) when accumulate), all row-major and packed; op(B)
// given as B (see pack_strip). Per panel of op(B): pack it, then each thread takes an
// equal share of the rows (whole register tiles; rounding does not depend on the split) in
// blocks of up to kRows; each block sums its kDepth blocks into C in order (the first one
// overwrites C unless accumulating). Blocks of kRows dealt out in turn would leave a
// thread idle for up to a block: a third of the time for the ~500-row GEMMs of an expert.
template <typename T, typename E>
void gemm_rows(const Operands<T, E>& op, const T* A_in, const T* B, bool trans, i64 N, int k, int n,
               T* C, bool accumulate) {
  const bool copies = !(std::is_same_v<E, T> && op.form == Form::kPlain);
  const i64 tile = la::gemm_tile_rows(),
            copy_rows =
                std::max(tile, kCopyBytes / (i64(op.padded(k)) * i64(sizeof(E))) / tile * tile);
  if (copies && N > copy_rows) {  // a row's sums do not depend on the rows beside it
    for (i64 r0 = 0; r0 < N; r0 += copy_rows)
      gemm_rows(op, A_in + r0 * k, B, trans, std::min(copy_rows, N - r0), k, n, C + r0 * n,
                accumulate);
    return;
  }
  const int L = 2 * la::gemm_lanes<T>();  // the strip: two vectors, a register tile's width
  const E* A = operand_rows(op, A_in, N, k);
  const i64 lda = op.padded(k);
  const i64 ldb = trans ? k : n;
  const std::unique_ptr<E[]> P =
      scratch<E>(std::size_t(op.padded(std::min(k, kPanelDepth))) * std::min(n, kPanelCols));
  for (int j0 = 0; j0 < n; j0 += kPanelCols) {
    const int nc = std::min(kPanelCols, n - j0);
    for (int p0 = 0; p0 < k; p0 += kPanelDepth) {
      const int kc = std::min(kPanelDepth, k - p0), kcp = op.padded(kc);
#pragma omp parallel
      {
        const int strips = (nc + L - 1) / L;
#pragma omp for schedule(static)
        for (int s = 0; s < strips; ++s)
          pack_strip(op, B, ldb, trans, p0, kc, j0, nc, s * L, L, P.get());
        const i64 threads = omp_get_num_threads(), tile = la::gemm_tile_rows();
        const i64 share = ((N + threads - 1) / threads + tile - 1) / tile * tile;
        const i64 r_begin = std::min(N, omp_get_thread_num() * share),
                  r_end = std::min(N, r_begin + share);
        for (i64 r0 = r_begin; r0 < r_end; r0 += kRows) {
          const int m = int(std::min<i64>(kRows, r_end - r0));
          for (int k0 = 0; k0 < kc; k0 += kDepth) {
            const int kb = std::min(kDepth, kc - k0);
            for (int s0 = 0; s0 < nc; s0 += L) {
              const int w = std::min(L, nc - s0);
              micro(op, m, w, kb, A + r0 * lda + p0 + k0, lda,
                    P.get() + i64(s0) * kcp + i64(k0) * w,
                    p0 + k0 == 0 && !accumulate ? T(0) : T(1), C + r0 * n + j0 + s0, n);
            }
          }
        }
      }
    }
  }
}

// The row GEMM of precision p (Form).
template <typename T>
void gemm_rows(Precision p, const T* A, const T* B, bool trans, i64 N, int k, int n, T* C,
               bool accumulate = false) {
  if (k == 0) {
    if (!accumulate) std::fill(C, C + N * n, T(0));
    return;
  }
  if (p == Precision::plain)
    return gemm_rows(Operands<T, T>{Form::kPlain}, A, B, trans, N, k, n, C, accumulate);
  if constexpr (std::is_same_v<T, float>) {
    if (la::gemm_path() == la::GemmPath::kAvx512Bf16)
      return gemm_rows(Operands<float, Bf16>{Form::kPairs}, A, B, trans, N, k, n, C, accumulate);
    return gemm_rows(Operands<float, float>{Form::kSwapped}, A, B, trans, N, k, n, C, accumulate);
  }
  gemm_rows(Operands<T, T>{Form::kRounded}, A, B, trans, N, k, n, C, accumulate);
}

}  // namespace

template <typename T>
void linear_forward(Host, Precision p, const T* x, const T* W, i64 N, int in, int out, T* y) {
  const profile::Scope scope(profile::kGemm, profile::Charge::by_region);
  gemm_rows(p, x, W, /*trans=*/true, N, in, out, y);  // op(B) = W^T [in, out]
}

template <typename T>
void linear_backward(Host, Precision p, const T* x, const T* W, const T* dy, i64 N, int in, int out,
                     T* dx, T* dW, bool accumulate) {
  const profile::Scope scope(profile::kGemm, profile::Charge::by_region);
  // dx = dy W, W is [out, in]. Added into dx: with one kDepth block the GEMM adds its sums
  // to dx in one rounding each, the bits of dx + (dy W); with more, dy W is summed apart
  // first, then added, for the same bits.
  if (dx && (!accumulate || out <= kDepth)) {
    gemm_rows(p, dy, W, /*trans=*/false, N, out, in, dx, accumulate);
  } else if (dx) {
    const std::unique_ptr<T[]> part = scratch<T>(std::size_t(N) * in);
    gemm_rows(p, dy, W, /*trans=*/false, N, out, in, part.get());
#pragma omp parallel for schedule(static)
    for (i64 i = 0; i < N * in; ++i) dx[i] += part[i];
  }
  if (!dW) return;
  // dW += dy^T x, a reduction over N, as the forward's row GEMM: a block of dy's columns
  // transposed into rows (dy^T [out, N] is the A operand, rows along the reduction, as the
  // register tiles read it best), x packed in strips as B. Read in place instead, the 6
  // values of dy^T a tile needs per step lie in one cache line each: 20% slower. Blocks
  // of kPanelCols x kPanelDepth bound the scratch (16 MiB in float); dW accumulates the
  // blocks in a fixed order, so the rounding depends on the shapes only.
  const std::unique_ptr<T[]> dyT =
      scratch<T>(std::size_t(std::min(out, kPanelCols)) * std::min<i64>(N, kPanelDepth));
  for (int o0 = 0; o0 < out; o0 += kPanelCols) {
    const int ob = std::min(kPanelCols, out - o0);
    for (i64 n0 = 0; n0 < N; n0 += kPanelDepth) {
      const int nb = int(std::min<i64>(kPanelDepth, N - n0));
#pragma omp parallel for schedule(static)
      for (int c0 = 0; c0 < ob; c0 += 8)  // dyT[c, r] = dy[n0 + r, o0 + c]
        la::transpose<T>(nb, std::min(8, ob - c0), dy + n0 * out + o0 + c0, out,
                         dyT.get() + i64(c0) * nb, nb);
      gemm_rows(p, dyT.get(), x + n0 * in, /*trans=*/false, ob, nb, in, dW + i64(o0) * in,
                /*accumulate=*/true);
    }
  }
}

template void linear_forward(Host, Precision, const float*, const float*, std::int64_t, int, int,
                             float*);
template void linear_forward(Host, Precision, const double*, const double*, std::int64_t, int, int,
                             double*);
template void linear_backward(Host, Precision, const float*, const float*, const float*,
                              std::int64_t, int, int, float*, float*, bool);
template void linear_backward(Host, Precision, const double*, const double*, const double*,
                              std::int64_t, int, int, double*, double*, bool);

}  // namespace gdn::ops
