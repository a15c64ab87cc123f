// The bf16 tensor-core instruction and the block-level GEMM built on it (sm_80 and later).
// The fragment layouts and the host-checkable parts are in mma_fragments.h and
// block_gemm_bf16.h; this file adds only what needs a GPU. docs/design.md §2f.
#pragma once

#include "ops/mma/block_gemm_bf16.h"

namespace gdn::mma {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
// d = a b + d for one warp's 16 x 8 x 16 tile (every lane calls it: a warp-wide collective).
__device__ inline void mma_bf16(FragC& d, const FragA& a, const FragB& b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d.c[0]), "+f"(d.c[1]), "+f"(d.c[2]), "+f"(d.c[3])
      : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
}

// C = beta C + alpha op(A) op(B) by 256 threads (block_gemm_bf16.h's contract and order).
// stage: BlockTile::kStageElems bf16 of shared memory. The caller provides the barriers
// around the call, as for tf32_gemm. Not inlined: CudaExec calls it from some 30 places per
// pass kernel, and inlined copies made the GDN passes' float unit compile 167 s instead of
// 135 s (127 s without the bf16 path), for the same registers.
template <bool kTA, bool kTB>
__device__ __noinline__ void bf16_block_gemm_of(Bf16* stage, int m, int n, int k, float alpha,
                                                const float* A, int lda, const float* B, int ldb,
                                                float beta, float* C, int ldc, Structure s) {
  using BT = BlockTile;
  Bf16* As = stage;
  Bf16* Bs = stage + BT::kStageA;
  const int tid = int(threadIdx.x), warp = tid / kWarp, lane = tid % kWarp;
  const bool va = quads_ok(A, lda), vb = quads_ok(B, ldb);
  const int tiles_m = (m + BT::kM - 1) / BT::kM, tiles_n = (n + BT::kN - 1) / BT::kN;
  for (int tile = 0; tile < tiles_m * tiles_n; ++tile) {
    const int i0 = (tile / tiles_n) * BT::kM, j0 = (tile % tiles_n) * BT::kN;
    if (tile_skipped(s, i0, j0)) continue;
    const KRange kr = k_range(s, i0, k);
    FragC acc[BT::kNTiles];
    for (int p0 = kr.lo; p0 < kr.hi; p0 += BT::kK) {
      const int kk = kr.hi - p0 < BT::kK ? kr.hi - p0 : BT::kK;
      stage_slice<kTA, kTB>(tid, m, n, i0, j0, p0, kk, A, lda, va, B, ldb, vb, As, Bs);
      __syncthreads();
      GDN_UNROLL
      for (int ks = 0; ks < BT::kK; ks += kK) {
        const FragA a = warp_a<kTA>(lane, warp, ks, As);
        GDN_UNROLL
        for (int c = 0; c < BT::kNTiles; ++c)
          mma_bf16(acc[c], a, warp_b<kTB>(lane, warp, ks, c, Bs));
      }
      __syncthreads();  // the next slice overwrites As, Bs
    }
    for (int c = 0; c < BT::kNTiles; ++c)
      store_tile(lane, warp, c, acc[c], m, n, i0, j0, alpha, beta, C, ldc);
  }
}
__device__ inline void bf16_block_gemm(Bf16* stage, bool ta, bool tb, int m, int n, int k,
                                       float alpha, const float* A, int lda, const float* B,
                                       int ldb, float beta, float* C, int ldc, Structure s) {
  if (ta && tb)
    bf16_block_gemm_of<true, true>(stage, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
  else if (ta)
    bf16_block_gemm_of<true, false>(stage, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
  else if (tb)
    bf16_block_gemm_of<false, true>(stage, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
  else
    bf16_block_gemm_of<false, false>(stage, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
}
#endif

}  // namespace gdn::mma
