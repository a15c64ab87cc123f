// The parts of the block-level bf16 tensor-core GEMM (mma_bf16.cuh, bf16_block_gemm) that
// are not the mma instruction itself: staging op(A) and op(B) into shared memory as bf16,
// the warps' tiles and fragment loads, and the epilogue. Host-compilable, so the CPU test
// runs them lane by lane around an emulated mma (tests/unit/test_mma_emulation.cpp).
//
// C = beta C + alpha op(A) op(B), row-major, m x n x k, all floats in global memory
// (la::gemm's contract). 256 threads, 8 warps, per 64 x 64 output tile: warp w takes rows
// 16 (w % 4) + [0, 16) and columns 32 (w / 4) + [0, 32), four 16 x 8 mma tiles. k runs in
// slices of 32 (two mma steps); each slice of op(A) (64 x 32) and op(B) (32 x 64) is
// rounded to bf16 once, into shared memory, laid out as it lies in global memory (so that
// the staging reads 16 bytes at a time along the rows of A and B, whichever their
// transposition); a fragment is then one ldmatrix, .trans where its pairs lie across the
// staged rows. The transpositions are template parameters. The products and the sums are
// fp32 inside the mma; the slices add into the fp32 accumulators in k order; alpha and
// beta are applied once, in fp32, at the end. docs/design.md §2f.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/error.h"
#include "core/hd.h"
#include "ops/gemm/structure.h"
#include "ops/mma/mma_fragments.h"

namespace gdn::mma {

struct BlockTile {
  static constexpr int kThreads = 256, kM = 64, kN = 64, kK = 32;
  // Staged rows 8 bf16 (16 bytes) longer than their data: the eight rows an ldmatrix reads
  // start 4 banks apart, so they hit all 32. op(A) as [kM][kLdA] (A row-major) or
  // [kK][kLdAT] (A transposed, k-major); op(B) as [kN][kLdB] (B transposed) or [kK][kLdBT].
  static constexpr int kLdA = kK + 8, kLdAT = kM + 8, kLdB = kK + 8, kLdBT = kN + 8;
  static constexpr int kStageA = kM * kLdA > kK* kLdAT ? kM* kLdA : kK* kLdAT;
  static constexpr int kStageB = kN * kLdB > kK* kLdBT ? kN* kLdB : kK* kLdBT;
  static constexpr int kStageElems = kStageA + kStageB;  // bf16 elements of staging
  static constexpr int kNTiles = 4;                      // 16 x 8 tiles per warp
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

// Four floats from 16-byte aligned memory (one 16-byte load on the GPU), and four bf16 into
// 8-byte aligned memory (one 8-byte store), the pairs packed low element first.
struct Quad {
  float v[4];
};
GDN_HD inline Quad load_quad(const float* p) {
#ifdef __CUDA_ARCH__
  const float4 x = *reinterpret_cast<const float4*>(p);
  return {{x.x, x.y, x.z, x.w}};
#else
  GDN_CHECK(reinterpret_cast<std::uintptr_t>(p) % 16 == 0,
            "mma::load_quad: four floats at an address not 16-byte aligned");
  return {{p[0], p[1], p[2], p[3]}};
#endif
}
GDN_HD inline void store_quad(Bf16* d, const Quad& q) {
  const std::uint32_t lo = pack_bf16(q.v[0], q.v[1]), hi = pack_bf16(q.v[2], q.v[3]);
#ifdef __CUDA_ARCH__
  *reinterpret_cast<uint2*>(d) = make_uint2(lo, hi);
#else
  GDN_CHECK(reinterpret_cast<std::uintptr_t>(d) % 8 == 0,
            "mma::store_quad: four bf16 at an address not 8-byte aligned");
  d[0].bits = std::uint16_t(lo & 0xffffu), d[1].bits = std::uint16_t(lo >> 16);
  d[2].bits = std::uint16_t(hi & 0xffffu), d[3].bits = std::uint16_t(hi >> 16);
#endif
}
// Whether a matrix's rows can be read 16 bytes at a time: ld a multiple of 4, m aligned.
GDN_HD inline bool quads_ok(const float* m, int ld) {
  return ld % 4 == 0 && reinterpret_cast<std::uintptr_t>(m) % 16 == 0;
}

// Thread tid's share of rounding a kRows x kCols block of floats, src[r * ld + c], into
// bf16 at dst[r * ldd + c], a quad (4 floats along a row) at a time; consecutive threads
// take consecutive quads of a row. kWhole: every quad is inside the matrix and vec
// (quads_ok), so each is one 16-byte load, two cvt and one 8-byte store; otherwise the
// elements outside r < vr, c < vc are zero and a quad is read whole only where it can be.
template <int kRows, int kCols, bool kWhole>
GDN_HD void stage_block(int tid, const float* src, int ld, int vr, int vc, bool vec, Bf16* dst,
                        int ldd) {
  constexpr int kQuads = kCols / 4;
  static_assert(kCols % 4 == 0 && (kRows * kQuads) % BlockTile::kThreads == 0);
  GDN_UNROLL
  for (int it = 0; it < kRows * kQuads / BlockTile::kThreads; ++it) {  // a fixed count: 2
    const int x = tid + it * BlockTile::kThreads, r = x / kQuads, c = 4 * (x % kQuads);
    Bf16* d = dst + r * ldd + c;
    if (kWhole || (vec && r < vr && c + 4 <= vc)) {
      store_quad(d, load_quad(src + r * ld + c));
    } else {
      for (int e = 0; e < 4; ++e) d[e] = to_bf16(r < vr && c + e < vc ? src[r * ld + c + e] : 0.0f);
    }
  }
}

// stage_slice's blocks with their edges: out of line, so that the common, whole slices'
// loop holds one call.
template <bool kTA, bool kTB>
GDN_HD GDN_NOINLINE void stage_slice_edges(int tid, int m, int n, int i0, int j0, int p0, int kk,
                                           const float* A, int lda, bool va, const float* B,
                                           int ldb, bool vb, Bf16* As, Bf16* Bs) {
  using BT = BlockTile;
  if constexpr (kTA)  // A is k x m: rows p, columns i
    stage_block<BT::kK, BT::kM, false>(tid, A + p0 * lda + i0, lda, kk, m - i0, va, As, BT::kLdAT);
  else
    stage_block<BT::kM, BT::kK, false>(tid, A + i0 * lda + p0, lda, m - i0, kk, va, As, BT::kLdA);
  if constexpr (kTB)  // B is n x k: rows j, columns p
    stage_block<BT::kN, BT::kK, false>(tid, B + j0 * ldb + p0, ldb, n - j0, kk, vb, Bs, BT::kLdB);
  else
    stage_block<BT::kK, BT::kN, false>(tid, B + p0 * ldb + j0, ldb, kk, n - j0, vb, Bs, BT::kLdBT);
}

// Thread tid's share of staging the k slice [p0, p0 + kk) of the output tile at (i0, j0):
// op(A)'s 64 x 32 and op(B)'s 32 x 64 blocks as their rows lie in A and B (va, vb: quads_ok
// of A and B), zero outside the matrices. A slice wholly inside both, of aligned matrices
// (the common case: every slice of a tile away from the matrices' ends), takes the quads
// inline; the rest stage_slice_edges.
template <bool kTA, bool kTB>
GDN_HD void stage_slice(int tid, int m, int n, int i0, int j0, int p0, int kk, const float* A,
                        int lda, bool va, const float* B, int ldb, bool vb, Bf16* As, Bf16* Bs) {
  using BT = BlockTile;
  if (!(va && vb && kk == BT::kK && m - i0 >= BT::kM && n - j0 >= BT::kN)) {
    stage_slice_edges<kTA, kTB>(tid, m, n, i0, j0, p0, kk, A, lda, va, B, ldb, vb, As, Bs);
    return;
  }
  if constexpr (kTA)
    stage_block<BT::kK, BT::kM, true>(tid, A + p0 * lda + i0, lda, 0, 0, true, As, BT::kLdAT);
  else
    stage_block<BT::kM, BT::kK, true>(tid, A + i0 * lda + p0, lda, 0, 0, true, As, BT::kLdA);
  if constexpr (kTB)
    stage_block<BT::kN, BT::kK, true>(tid, B + j0 * ldb + p0, ldb, 0, 0, true, Bs, BT::kLdB);
  else
    stage_block<BT::kK, BT::kN, true>(tid, B + p0 * ldb + j0, ldb, 0, 0, true, Bs, BT::kLdBT);
}

// Warp w's A fragment for mma step ks (0 or 16) of the staged slice, and its B fragment of
// 16 x 8 tile c (0-3).
template <bool kTA>
GDN_HD FragA warp_a(int lane, int warp, int ks, const Bf16* As) {
  const int r0 = (warp % 4) * 16;
  if constexpr (kTA)  // op(A)(i, p) = As[p][i]
    return load_a(lane, Cols{As + ks * BlockTile::kLdAT + r0, BlockTile::kLdAT});
  else
    return load_a(lane, MatrixRows{{As + r0 * BlockTile::kLdA + ks, BlockTile::kLdA}});
}
template <bool kTB>
GDN_HD FragB warp_b(int lane, int warp, int ks, int c, const Bf16* Bs) {
  const int j0 = (warp / 4) * 32 + c * 8;
  if constexpr (kTB)  // op(B)(p, j) = Bs[j][p]
    return load_b(lane, MatrixCols{{Bs + j0 * BlockTile::kLdB + ks, BlockTile::kLdB}});
  else
    return load_b(lane, Rows{Bs + ks * BlockTile::kLdBT + j0, BlockTile::kLdBT});
}

// beta c + alpha acc, the GEMM's epilogue (beta == 0 never reads c), each operation
// rounded on its own on the GPU too, so that every kernel built on these mma steps gets
// the same bits from the same sums (the register walks, gdn/chunk/bf16_walk.h).
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
