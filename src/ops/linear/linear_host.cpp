// Linear on the host: a packed, register-blocked GEMM over row blocks (ops/gemm/gemm.h),
// bit-identical for any OMP_NUM_THREADS (rounding depends on the tile constants only).
// In the bf16 mode (core/autocast.h) both operands are rounded to bf16 where they are
// packed or copied; a product of two bf16 values is exact in float, so the GEMM is then a
// bf16 x bf16 matmul with float accumulation, the numerics of AMX and of tensor cores.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/autocast.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/profile.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/simd.h"
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
// thread count, the row block or the strip width.
constexpr int kRows = 120;   // rows of C per block of a thread's share: whole tiles of 6 and of 8
constexpr int kDepth = 256;  // reduction length per micro-kernel call

// op(B) is packed in panels of at most kPanelDepth x kPanelCols, which bounds the scratch
// (a tied LM head has k or n = vocab). Both are multiples of kDepth and of any vector
// width, so the panels change neither the strips nor the order of the sums.
constexpr int kPanelCols = 2048;
constexpr int kPanelDepth = 2048;

// The strip width: two vectors (12 accumulators on AVX2, 16 on AVX-512; one vector would
// leave half of them idle and double the A broadcasts per FMA).
template <typename T>
constexpr int kStrip = 2 * la::detail::kLanes<T>;

// n elements from src to dst, rounded to bf16 values when bf16 (an operand of the bf16 mode).
template <typename T>
void copy_operand(const T* src, i64 n, T* dst, bool bf16) {
  if (!bf16) {
    std::copy_n(src, n, dst);
    return;
  }
  for (i64 i = 0; i < n; ++i) dst[i] = T(round_bf16(src[i]));
}

// Packs strip s0 / L of rows [p0, p0 + k) x columns [j0, j0 + n) of op(B) (B is
// [n_total, ldb] holding op(B)^T when trans): the k rows of columns [s0, s0 + w) (w = L, or
// the tail) contiguously at P + s0 k, rounded to bf16 values when bf16. A whole panel is
// the strips s0 = 0, L, 2L, ...
template <typename T>
void pack_strip(const T* B, i64 ldb, bool trans, i64 p0, int k, i64 j0, int n, int s0, T* P,
                bool bf16) {
  const int w = std::min(kStrip<T>, n - s0);
  T* dst = P + i64(s0) * k;
  if (!trans) {  // w contiguous elements of each row
    const T* src = B + p0 * ldb + j0 + s0;
    if (w == kStrip<T> && !bf16) {  // two vector moves per row (memmove's call costs more)
      constexpr int L = la::detail::kLanes<T>;
      for (int p = 0; p < k; ++p) {
        simd::store(dst + i64(p) * w, simd::load(src + p * ldb));
        simd::store(dst + i64(p) * w + L, simd::load(src + p * ldb + L));
      }
      return;
    }
    for (int p = 0; p < k; ++p) copy_operand(src + p * ldb, w, dst + i64(p) * w, bf16);
    return;
  }
  // Row j0 + s0 + j of B, read along, is column j: a transpose of w rows of k.
  la::transpose<T>(w, k, B + (j0 + s0) * ldb + p0, ldb, dst, w);
  if (bf16)
    for (i64 e = 0; e < i64(k) * w; ++e) dst[e] = T(round_bf16(dst[e]));
}

// Scratch that is written before it is read: uninitialised (a zeroed std::vector would
// memset every packing buffer, ~1000 of them a step).
template <typename T>
std::unique_ptr<T[]> scratch(std::size_t n) {
  return std::unique_ptr<T[]>(new T[n]);
}

// A [N, k] as the GEMM reads it: itself, or in the bf16 mode a copy rounded to bf16 values
// in `copy`.
template <typename T>
const T* operand_rows(const T* A, i64 N, int k, bool bf16, std::unique_ptr<T[]>& copy) {
  if (!bf16) return A;
  copy = scratch<T>(std::size_t(N) * k);
#pragma omp parallel for schedule(static)
  for (i64 r = 0; r < N; ++r) copy_operand(A + r * k, k, copy.get() + r * k, true);
  return copy.get();
}

// C[N, n] = A[N, k] op(B) (C += A op(B) when accumulate), all row-major and packed; op(B)
// given as B (see pack_strip). Per panel of op(B): pack it, then each thread takes an
// equal share of the rows (whole register tiles; rounding does not depend on the split) in
// blocks of up to kRows; each block sums its kDepth blocks into C in order (the first one
// overwrites C unless accumulating). Blocks of kRows dealt out in turn would leave a
// thread idle for up to a block: a third of the time for the ~500-row GEMMs of an expert.
template <typename T>
void gemm_rows(const T* A, const T* B, bool trans, i64 N, int k, int n, T* C,
               bool accumulate = false) {
  constexpr int L = kStrip<T>;
  if (k == 0) {
    if (!accumulate) std::fill(C, C + N * n, T(0));
    return;
  }
  const bool bf16 = bf16_autocast();
  std::unique_ptr<T[]> rounded;
  A = operand_rows(A, N, k, bf16, rounded);
  const i64 ldb = trans ? k : n;
  const std::unique_ptr<T[]> P =
      scratch<T>(std::size_t(std::min(k, kPanelDepth)) * std::min(n, kPanelCols));
  for (int j0 = 0; j0 < n; j0 += kPanelCols) {
    const int nc = std::min(kPanelCols, n - j0);
    for (int p0 = 0; p0 < k; p0 += kPanelDepth) {
      const int kc = std::min(kPanelDepth, k - p0);
#pragma omp parallel
      {
        const int strips = (nc + L - 1) / L;
#pragma omp for schedule(static)
        for (int s = 0; s < strips; ++s)
          pack_strip(B, ldb, trans, p0, kc, j0, nc, s * L, P.get(), bf16);
        const i64 threads = omp_get_num_threads(), tile = la::kTileRows;
        const i64 share = ((N + threads - 1) / threads + tile - 1) / tile * tile;
        const i64 r_begin = std::min(N, omp_get_thread_num() * share),
                  r_end = std::min(N, r_begin + share);
        for (i64 r0 = r_begin; r0 < r_end; r0 += kRows) {
          const int m = int(std::min<i64>(kRows, r_end - r0));
          for (int k0 = 0; k0 < kc; k0 += kDepth) {
            const int kb = std::min(kDepth, kc - k0);
            for (int s0 = 0; s0 < nc; s0 += L) {
              const int w = std::min(L, nc - s0);
              la::gemm(false, false, m, w, kb, T(1), A + r0 * k + p0 + k0, k,
                       P.get() + i64(s0) * kc + i64(k0) * w, w,
                       p0 + k0 == 0 && !accumulate ? T(0) : T(1), C + r0 * n + j0 + s0, n);
            }
          }
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void linear_forward(Host, const T* x, const T* W, i64 N, int in, int out, T* y) {
  const profile::Scope scope(profile::kGemm, profile::Charge::by_region);
  gemm_rows(x, W, /*trans=*/true, N, in, out, y);  // op(B) = W^T [in, out]
}

template <typename T>
void linear_backward(Host, const T* x, const T* W, const T* dy, i64 N, int in, int out, T* dx,
                     T* dW, bool accumulate) {
  const profile::Scope scope(profile::kGemm, profile::Charge::by_region);
  // dx = dy W, W is [out, in]. Added into dx: with one kDepth block the GEMM adds its sums
  // to dx in one rounding each, the bits of dx + (dy W); with more, dy W is summed apart
  // first, then added, for the same bits.
  if (dx && (!accumulate || out <= kDepth)) {
    gemm_rows(dy, W, /*trans=*/false, N, out, in, dx, accumulate);
  } else if (dx) {
    const std::unique_ptr<T[]> part = scratch<T>(std::size_t(N) * in);
    gemm_rows(dy, W, /*trans=*/false, N, out, in, part.get());
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
      gemm_rows(dyT.get(), x + n0 * in, /*trans=*/false, ob, nb, in, dW + i64(o0) * in,
                /*accumulate=*/true);
    }
  }
}

template void linear_forward(Host, const float*, const float*, std::int64_t, int, int, float*);
template void linear_forward(Host, const double*, const double*, std::int64_t, int, int, double*);
template void linear_backward(Host, const float*, const float*, const float*, std::int64_t, int,
                              int, float*, float*, bool);
template void linear_backward(Host, const double*, const double*, const double*, std::int64_t, int,
                              int, double*, double*, bool);

}  // namespace gdn::ops
