// Which tile each block of the CUDA grouped GEMM (grouped_linear_cuda.cu) computes, and
// its operands, from the device offsets alone. Host-compilable: the CPU test runs the
// kernels' schedule and index math around an emulated block GEMM
// (tests/unit/test_grouped_linear.cpp).
//
// Expert e owns the row tiles [start(e), start(e + 1)) with start(e) = offsets[e] / 64 + e.
// That is floor(offsets[e + 1] / 64) - floor(offsets[e] / 64) + 1 >= ceil(n_e / 64) tiles,
// enough for its n_e rows in tiles of 64 starting at offsets[e]; the spare ones (at most
// one per expert) have no rows. So R / 64 + E blocks cover every routed row once, a tile
// never crosses an expert boundary, and the host needs only R and E to launch.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace gdn::grouped {

constexpr int kTileRows = 64;  // rows per tile: BlockTile::kM of the bf16 block GEMM

struct RowTile {
  int expert;
  std::int64_t row0;  // the first routed row
  int rows;           // 0: a spare tile
};

// The row tiles to launch for R routed rows over E experts.
GDN_HD inline std::int64_t num_row_tiles(std::int64_t R, int E) {
  return R / kTileRows + E;
}

GDN_HD inline std::int64_t tile_start(const std::int64_t* offsets, int e) {
  return offsets[e] / kTileRows + e;
}

// Tile t (0 <= t < num_row_tiles(offsets[E], E)): its expert, by a binary search for the
// e with start(e) <= t < start(e + 1) (start is strictly increasing), and its rows.
GDN_HD inline RowTile row_tile(std::int64_t t, const std::int64_t* offsets, int E) {
  int lo = 0, hi = E;  // start(lo) <= t < start(hi)
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (tile_start(offsets, mid) <= t)
      lo = mid;
    else
      hi = mid;
  }
  const std::int64_t row0 = offsets[lo] + (t - tile_start(offsets, lo)) * kTileRows;
  const std::int64_t left = offsets[lo + 1] - row0;
  return {lo, row0, left <= 0 ? 0 : int(left < kTileRows ? left : kTileRows)};
}

// One block's GEMM: C = op(A) op(B) (+ C when accumulate), m x n x k with m, n <= 64, the
// operands of BlockTile's contract (row-major, op = transpose when ta / tb). m == 0: the
// block has nothing to do.
template <typename T>
struct TileGemm {
  bool ta, tb;
  int m, n, k;
  const T* A;
  int lda;
  const T* B;
  int ldb;
  bool accumulate;
  T* C;
  int ldc;
};

GDN_HD inline int col_tiles(int n) {
  return (n + kTileRows - 1) / kTileRows;
}

// The row kernels, grid (num_row_tiles(R, E), col_tiles(nd)): C[r, j] = sum_p A[r, p]
// op(W_e)(p, j) for the rows r of expert e, A [R, kd], C [R, nd], W_e = W + e w_stride;
// op(W_e) = W_e^T for W_e [nd, kd] when tb (the forward: x W_e^T), else W_e [kd, nd] (dx =
// dy W_e). Block (bx, by): row tile bx, columns [64 by, 64 by + 64). accumulate: C += (the
// tile's sums are added to C once each).
template <typename T>
GDN_HD TileGemm<T> rows_tile(std::int64_t bx, int by, const T* A, const T* W, std::int64_t w_stride,
                             const std::int64_t* offsets, int E, int kd, int nd, bool tb, T* C,
                             bool accumulate = false) {
  const RowTile t = row_tile(bx, offsets, E);
  const int j0 = by * kTileRows;
  const T* We = W + t.expert * w_stride;
  const int n = nd - j0 < kTileRows ? nd - j0 : kTileRows;
  return {false,
          tb,
          t.rows,
          n,
          kd,
          A + t.row0 * kd,
          kd,
          tb ? We + std::int64_t(j0) * kd : We + j0,
          tb ? kd : nd,
          accumulate,
          C + t.row0 * nd + j0,
          nd};
}

// The dW kernel, grid (col_tiles(out) col_tiles(in), E): dW_e[i, j] += sum_r dy[r, i]
// x[r, j] over expert e's rows in order (op(A) = dy_e^T, op(B) = x_e); block bx is the
// tile (bx / col_tiles(in), bx % col_tiles(in)) of dW_e [out, in].
template <typename T>
GDN_HD TileGemm<T> dw_tile(int bx, int e, const T* x, const T* dy, const std::int64_t* offsets,
                           int in, int out, std::int64_t w_stride, T* dW) {
  const std::int64_t o = offsets[e], rows = offsets[e + 1] - o;
  const int i0 = bx / col_tiles(in) * kTileRows, j0 = bx % col_tiles(in) * kTileRows;
  const int m = rows == 0 ? 0 : (out - i0 < kTileRows ? out - i0 : kTileRows);
  const int n = in - j0 < kTileRows ? in - j0 : kTileRows;
  return {true,
          false,
          m,
          n,
          int(rows),
          dy + o * out + i0,
          out,
          x + o * in + j0,
          in,
          true,
          dW + e * w_stride + std::int64_t(i0) * in + j0,
          in};
}

}  // namespace gdn::grouped
