// The parts of the block-level bf16 tensor-core GEMM (mma_bf16.cuh, bf16_block_gemm) that
// are not the mma instruction itself: staging op(A) and op(B) into shared memory as bf16,
// the warps' tiles and fragment loads, and the epilogue. Host-compilable, so the CPU test
// runs them lane by lane around an emulated mma (tests/unit/test_mma_emulation.cpp).
//
// C = beta C + alpha op(A) op(B), row-major, m x n x k, all floats in global memory
// (la::gemm's contract). 256 threads, 8 warps, per 64 x 64 output tile: warp w takes rows
// 16 (w % 4) + [0, 16) and columns 32 (w / 4) + [0, 32), four 16 x 8 mma tiles. k runs in
// slices of 32 (two mma steps); each slice of op(A) (64 x 32) and op(B) (32 x 64) is
// rounded to bf16 once, into shared memory, op(B) transposed: both then hold every fragment
// register's two elements side by side, so a fragment is one ldmatrix. The products and the
// sums are fp32 inside the mma; the slices add into the fp32 accumulators in k order; alpha and
// beta are applied once, in fp32, at the end. docs/design.md §2f.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/hd.h"
#include "ops/gemm/structure.h"
#include "ops/mma/mma_fragments.h"

namespace gdn::mma {

struct BlockTile {
  static constexpr int kThreads = 256, kM = 64, kN = 64, kK = 32;
  // Rows of kK + 8 bf16 (20 words): the eight row groups of a fragment load hit 32 banks.
  static constexpr int kLdA = kK + 8, kLdB = kK + 8;
  static constexpr int kStageElems = kM * kLdA + kN * kLdB;  // bf16 elements of staging
  static constexpr int kNTiles = 4;                          // 16 x 8 tiles per warp
};

// The k range [lo, hi) of output rows [i0, i0 + 64) that can be non-zero under s.
struct KRange {
  int lo, hi;
};
GDN_HD inline KRange k_range(Structure s, int i0, int k) {
  KRange r{0, k};
  if (s == Structure::kLowerA) r.hi = i0 + BlockTile::kM < k ? i0 + BlockTile::kM : k;
  if (s == Structure::kUpperA) r.lo = i0 < k ? i0 : k;
  return r;
}
// Whether the tile at (i0, j0) is wholly in the unwanted upper triangle of C.
GDN_HD inline bool tile_skipped(Structure s, int i0, int j0) {
  return s == Structure::kLowerC && j0 > i0 + BlockTile::kM - 1;
}

// Thread tid's share of staging the k slice [p0, p0 + 32) (zero past kk = its valid
// length): As[ii][pp] = op(A)(i0 + ii, p0 + pp), Bs[jj][pp] = op(B)(p0 + pp, j0 + jj),
// rounded to bf16, zero outside the matrices. Consecutive threads read consecutive
// addresses of A and B, whichever way they are transposed.
GDN_HD inline void stage_slice(int tid, bool ta, bool tb, int m, int n, int i0, int j0, int p0,
                               int kk, const float* A, int lda, const float* B, int ldb, Bf16* As,
                               Bf16* Bs) {
  using BT = BlockTile;
  for (int x = tid; x < BT::kK * BT::kM; x += BT::kThreads) {
    const int ii = ta ? x % BT::kM : x / BT::kK, pp = ta ? x / BT::kM : x % BT::kK;
    const int i = i0 + ii, p = p0 + pp;
    const float v = i < m && pp < kk ? (ta ? A[p * lda + i] : A[i * lda + p]) : 0.0f;
    As[ii * BT::kLdA + pp] = to_bf16(v);
  }
  for (int x = tid; x < BT::kK * BT::kN; x += BT::kThreads) {
    const int jj = tb ? x / BT::kK : x % BT::kN, pp = tb ? x % BT::kK : x / BT::kN;
    const int j = j0 + jj, p = p0 + pp;
    const float v = j < n && pp < kk ? (tb ? B[j * ldb + p] : B[p * ldb + j]) : 0.0f;
    Bs[jj * BT::kLdB + pp] = to_bf16(v);
  }
}

// Warp w's A fragment for mma step ks (0 or 16) of the staged slice, and its B fragment of
// 16 x 8 tile c (0-3).
GDN_HD inline FragA warp_a(int lane, int warp, int ks, const Bf16* As) {
  return load_a_matrices(lane, Rows{As + (warp % 4) * 16 * BlockTile::kLdA + ks, BlockTile::kLdA});
}
GDN_HD inline FragB warp_b(int lane, int warp, int ks, int c, const Bf16* Bs) {
  return load_b_matrices(
      lane, Cols{Bs + ((warp / 4) * 32 + c * 8) * BlockTile::kLdB + ks, BlockTile::kLdB});
}

// beta c + alpha acc, the GEMM's epilogue (beta == 0 never reads c), each operation
// rounded on its own on the GPU too, so that every kernel built on these mma steps gets
// the same bits from the same sums (the register walks, gdn/pass/bf16_walk.h).
GDN_HD inline float epilogue(float alpha, float acc, float beta, float c) {
  return hd::add_rn(beta == 0.0f ? 0.0f : hd::mul_rn(beta, c), hd::mul_rn(alpha, acc));
}

// C[i][j] = beta C[i][j] + alpha acc for lane's elements of warp w's tile c (beta == 0
// never reads C). Every element of the 64 x 64 tile belongs to one lane of one warp.
GDN_HD inline void store_tile(int lane, int warp, int c, const FragC& acc, int m, int n, int i0,
                              int j0, float alpha, float beta, float* C, int ldc) {
  const int r0 = i0 + (warp % 4) * 16, c0 = j0 + (warp / 4) * 32 + c * 8;
  store_c(lane, acc, [&](int i, int j, float v) {
    if (r0 + i < m && c0 + j < n) {
      float& out = C[(r0 + i) * ldc + c0 + j];
      out = epilogue(alpha, v, beta, out);
    }
  });
}

}  // namespace gdn::mma
