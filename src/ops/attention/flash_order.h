// The order of operations of the flash attention kernels (flash_attention_cuda.cu) as plain
// host-compilable functions: tile geometry, shared-memory staging, fragment loads, the
// mask, the online softmax row update and the backward's per-element formulas. The CUDA
// kernels call these; tests/unit/test_flash_attention.cpp calls the same ones lane by lane
// around an emulated mma, so the index math and the softmax bookkeeping the GPU runs are
// checked on the CPU.
//
// Conventions: scores in log2 units, x = s * scale * log2(e), p = exp2(x - m), so one
// multiply per score and exp2 (a single instruction on the GPU); lse is stored in natural
// units, ln 2 (m + log2 l), the op's contract (attention.h). Operands of every product are
// bf16 (Q, K, V, dO staged rounded; P and dS rounded when turned into A fragments);
// accumulators, the softmax statistics and delta are fp32.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/bf16.h"
#include "core/hd.h"
#include "ops/mma/mma_fragments.h"

// core/hd.h's unrolling (on the GPU only), under the names the flash kernels use.
#define GDN_FLASH_UNROLL GDN_UNROLL
#define GDN_FLASH_UNROLL_BY(n) GDN_UNROLL_BY(n)

namespace gdn::flash {

using i64 = std::int64_t;
using mma::FragA;
using mma::FragB;
using mma::FragC;

constexpr int kTile = 64;  // query rows per block; keys per key tile
constexpr int kWarps = 4;  // each warp owns 16 rows of the tile (queries, or keys)
constexpr int kThreads = kWarps * mma::kWarp;
constexpr int kPad = 8;  // bf16 per shared row: rows 16 bytes off a 128-byte stride
constexpr int kMaxDim = 256;
constexpr int kSlices = kTile / 16;  // 16-wide k slices of a 64-key (or query) tile
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.693147180559945309f;
constexpr float kNoMax = -std::numeric_limits<float>::infinity();

// The head dim the kernels are instantiated for: D zero-padded up to 64, 128 or 256 (the
// zero columns add nothing to q . k and give output columns that are not stored).
GDN_HD constexpr int padded_dim(int D) {
  return D <= 64 ? 64 : D <= 128 ? 128 : 256;
}

// Shared tiles of bf16, [kTile][Dp] (tokens by head dim) as the tensors lie; the B
// operands whose k index runs over tokens read them across rows (frag_b_rows).
template <int Dp>
struct Layout {
  static constexpr int kLdRow = Dp + kPad;
  static constexpr int kRowElems = kTile * kLdRow;
};

// ---------------------------------------------------------------------------------------
// Key windows: query row i sees keys lo..hi (kstart_i..qpos_i); padding rows past Tq see
// none (lo > hi), so they add exact zeros everywhere.

struct Window {
  i64 lo, hi;
};
GDN_HD inline bool visible(i64 j, Window w) {
  return w.lo <= j && j <= w.hi;
}
GDN_HD inline Window query_window(const i64* qpos, const i64* kstart, i64 b, i64 Tq, i64 i) {
  if (i >= Tq) return {1, 0};
  return {kstart ? kstart[b * Tq + i] : 0, qpos[i]};
}
// The union of the windows of query tile [i0, i0 + kTile): the key tiles it visits.
GDN_HD inline Window tile_window(const i64* qpos, const i64* kstart, i64 b, i64 Tq, i64 i0) {
  Window u{INT64_MAX, -1};
  for (i64 i = i0; i < i0 + kTile && i < Tq; ++i) {
    const Window w = query_window(qpos, kstart, b, Tq, i);
    u.lo = w.lo < u.lo ? w.lo : u.lo;
    u.hi = w.hi > u.hi ? w.hi : u.hi;
  }
  return u;
}
// The first key tile a window needs, and whether key tile [j0, j0 + kTile) meets it: the
// tiles wholly masked for every row of a query tile are never visited.
GDN_HD inline i64 first_key_tile(Window w) {
  return w.lo / kTile * kTile;
}
GDN_HD inline bool meets(Window w, i64 j0) {
  return w.lo <= w.hi && w.lo < j0 + kTile && j0 <= w.hi;
}

// ---------------------------------------------------------------------------------------
// Staging: thread tid of kThreads takes rows [0, n) and columns [0, D) of a strided array
// of E (float, rounded to bf16; or bf16 as it is), zeros elsewhere: dst[r][d] =
// src[r * stride + d]. Consecutive threads read consecutive addresses.
GDN_HD inline Bf16 staged(float x) {
  return to_bf16(x);
}
GDN_HD inline Bf16 staged(Bf16 x) {
  return x;
}
template <int Dp, typename E>
GDN_HD void stage_rows(int tid, const E* src, i64 stride, int n, int D, Bf16* dst) {
  for (int x = tid; x < kTile * Dp; x += kThreads) {
    const int r = x / Dp, d = x % Dp;
    dst[r * Layout<Dp>::kLdRow + d] = r < n && d < D ? staged(src[r * stride + d]) : Bf16{};
  }
}

// ---------------------------------------------------------------------------------------
// Fragments from shared bf16 tiles. Each register holds two elements adjacent in memory
// (mma_fragments.h's layout); a fragment is one ldmatrix on the GPU.

// The A fragment of the 16 x 16 tile whose element (i, p) is base[i * ld + p].
GDN_HD inline FragA frag_a(int lane, const Bf16* base, int ld) {
  return mma::load_a(lane, mma::MatrixRows{{base, ld}});
}
// The B fragment of the 16 x 8 tile whose element (p, j) is base[j * ld + p]: B's columns
// are rows in memory (K's rows for Q K^T).
GDN_HD inline FragB frag_b(int lane, const Bf16* base, int ld) {
  return mma::load_b(lane, mma::MatrixCols{{base, ld}});
}
// The B fragment of the 16 x 8 tile whose element (p, j) is base[p * ld + j]: B's rows are
// rows in memory (V's rows for P V, K's for dS K), one ldmatrix .trans.
GDN_HD inline FragB frag_b_rows(int lane, const Bf16* base, int ld) {
  return mma::load_b(lane, mma::Rows{base, ld});
}

// ---------------------------------------------------------------------------------------
// The forward's online softmax. A warp's score tile is 16 query rows x 64 keys, eight C
// fragments s[c] (keys 8c..8c+7); a lane holds elements of rows c_row(lane, 0) and
// c_row(lane, 2) (index 0 and 1 below), two per fragment each.

GDN_HD inline float max2(float a, float b) {
  return a > b ? a : b;
}

// x = s scale2 (scale2 = scale log2 e) where key j0 + col sees the row, -inf elsewhere;
// w[e]: the window of the lane's row e (0, 1).
template <int N>
GDN_HD void scale_mask(int lane, FragC (&s)[N], float scale2, i64 j0, const Window (&w)[2]) {
  GDN_FLASH_UNROLL
  for (int c = 0; c < N; ++c) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e)
    s[c].c[e] = visible(j0 + 8 * c + mma::c_col(lane, e), w[e / 2]) ? s[c].c[e] * scale2 : kNoMax;
}
// The lane's share of its two rows' maxima; the four lanes of a row (lane / 4 equal) then
// combine theirs (a max: any order gives the same bits).
template <int N>
GDN_HD void lane_row_max(const FragC (&s)[N], float (&mx)[2]) {
  mx[0] = mx[1] = kNoMax;
  GDN_FLASH_UNROLL
  for (int c = 0; c < N; ++c) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e) mx[e / 2] = max2(mx[e / 2], s[c].c[e]);
}

// One row's running max m and sum l after a tile whose max is mt: returns the factor
// alpha that rescales what was summed against the old max, and sets mu, the max the
// tile's scores subtract. A row that has seen no key yet (m = mt = -inf) subtracts 0, so
// exp2(-inf - 0) = 0 and no -inf - -inf = NaN appears.
GDN_HD inline float online_step(float& m, float& l, float mt, float& mu) {
  const float mn = max2(m, mt);
  mu = mn == kNoMax ? 0.0f : mn;
  const float alpha = hd::exp2(m - mu);
  m = mn;
  l *= alpha;
  return alpha;
}
// p = exp2(x - mu) in place; the lane's partial sums of its two rows added to l (in
// fragment order; the quad's four partials are added at the very end).
template <int N>
GDN_HD void exponentiate(FragC (&s)[N], const float (&mu)[2], float (&l)[2]) {
  GDN_FLASH_UNROLL
  for (int c = 0; c < N; ++c) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e) {
    s[c].c[e] = hd::exp2(s[c].c[e] - mu[e / 2]);
    l[e / 2] += s[c].c[e];
  }
}
template <int N>
GDN_HD void rescale(FragC (&o)[N], const float (&alpha)[2]) {
  GDN_FLASH_UNROLL
  for (int n = 0; n < N; ++n) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e) o[n].c[e] *= alpha[e / 2];
}
// The final 1 / l (a row with no key, padding only: 0) and the natural-log lse.
GDN_HD inline float inverse_sum(float l) {
  return l > 0.0f ? 1.0f / l : 0.0f;
}
GDN_HD inline float natural_lse(float m, float l) {
  return kLn2 * (m + hd::log2(l));
}

// ---------------------------------------------------------------------------------------
// The backward's per-element formulas: P from the saved lse (lse2 = lse log2 e), then
// dS = P (dP - delta), delta_i = dO_i . O_i. Masked entries are exact zeros.

GDN_HD inline float probability(float s, float scale2, float lse2, bool seen) {
  return seen ? hd::exp2(s * scale2 - lse2) : 0.0f;
}
GDN_HD inline float score_grad(float p, float dp, float delta) {
  return p * (dp - delta);
}

// The dQ kernel's 16-key slice: rows are the lane's two query rows (windows w, lse2,
// delta), columns keys jb + 8c + c_col. s (the scores) becomes dS.
GDN_HD inline void query_major_grads(int lane, FragC (&s)[2], const FragC (&dp)[2], float scale2,
                                     i64 jb, const Window (&w)[2], const float (&lse2)[2],
                                     const float (&delta)[2]) {
  GDN_FLASH_UNROLL
  for (int c = 0; c < 2; ++c) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e) {
    const bool seen = visible(jb + 8 * c + mma::c_col(lane, e), w[e / 2]);
    const float p = probability(s[c].c[e], scale2, lse2[e / 2], seen);
    s[c].c[e] = score_grad(p, dp[c].c[e], delta[e / 2]);
  }
}
// The dK / dV kernel's 16-query slice of S^T: rows are the lane's two keys j[0], j[1],
// columns the query rows qb + 8c + c_col of the staged tile, whose windows and lse2 are
// per column. s (the scores) becomes P^T.
GDN_HD inline void key_major_probs(int lane, FragC (&s)[2], float scale2, const i64 (&j)[2],
                                   const Window* w, const float* lse2, int qb) {
  GDN_FLASH_UNROLL
  for (int c = 0; c < 2; ++c) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e) {
    const int col = qb + 8 * c + mma::c_col(lane, e);
    s[c].c[e] = probability(s[c].c[e], scale2, lse2[col], visible(j[e / 2], w[col]));
  }
}
// P^T (in p) becomes dS^T, with dP^T = V dO^T in dp and delta per column.
GDN_HD inline void key_major_grads(int lane, FragC (&p)[2], const FragC (&dp)[2],
                                   const float* delta, int qb) {
  GDN_FLASH_UNROLL
  for (int c = 0; c < 2; ++c) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e)
    p[c].c[e] = score_grad(p[c].c[e], dp[c].c[e], delta[qb + 8 * c + mma::c_col(lane, e)]);
}

}  // namespace gdn::flash
