// A warp's bf16 tensor-core instruction emulated on the CPU, lane by lane, and the block
// GEMM of ops/mma/mma_bf16.cuh composed around it from the same host-compilable parts
// (ops/mma/block_gemm_bf16.h). The emulated mma reads the lanes' registers through the
// PTX ISA's fragment tables written out independently of mma_fragments.h's index
// functions, so a wrong index there shows up as a wrong product here.
#pragma once

#include <array>
#include <cstdint>

#include "ops/mma/block_gemm_bf16.h"

namespace gdn::test {

using Lanes = std::array<int, 32>;

// D = A B + C for one m16n8k16 tile from the 32 lanes' fragments. The sums run in fp32 in k
// order: the hardware's order within the 16 products is unspecified, so the tests compare
// either exactly representable sums or within fp32 rounding.
inline void emulate_mma(mma::FragC (&d)[32], const mma::FragA (&a)[32], const mma::FragB (&b)[32]) {
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, tig = lane % 4;  // PTX's groupID, threadID_in_group
    for (int i = 0; i < 8; ++i) {                 // a0..a7, two per register
      const int row = (i == 0 || i == 1 || i == 4 || i == 5) ? group : group + 8;
      const int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      const std::uint32_t r = a[lane].r[i / 2];
      A[row][col] = i % 2 ? mma::unpack_hi(r) : mma::unpack_lo(r);
    }
    for (int i = 0; i < 4; ++i) {  // b0..b3
      const int row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0);
      const std::uint32_t r = b[lane].r[i / 2];
      B[row][group] = i % 2 ? mma::unpack_hi(r) : mma::unpack_lo(r);
    }
    for (int i = 0; i < 4; ++i) C[i < 2 ? group : group + 8][tig * 2 + (i & 1)] = d[lane].c[i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, tig = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = i < 2 ? group : group + 8, col = tig * 2 + (i & 1);
      float acc = 0.0f;
      for (int p = 0; p < 16; ++p) acc += A[row][p] * B[p][col];
      d[lane].c[i] = C[row][col] + acc;
    }
  }
}

// mma::bf16_block_gemm on the CPU: the same staging, fragment loads, tile order and
// epilogue, with the 8 warps' mma steps emulated one after another.
template <bool kTA, bool kTB>
void emulated_block_gemm_of(int m, int n, int k, float alpha, const float* A, int lda,
                            const float* B, int ldb, float beta, float* C, int ldc, Structure s) {
  using BT = mma::BlockTile;
  std::array<Bf16, BT::kStageElems> stage{};
  Bf16* As = stage.data();
  Bf16* Bs = stage.data() + BT::kStageA;
  const bool va = mma::quads_ok(A, lda), vb = mma::quads_ok(B, ldb);
  const int tiles_m = (m + BT::kM - 1) / BT::kM, tiles_n = (n + BT::kN - 1) / BT::kN;
  for (int tile = 0; tile < tiles_m * tiles_n; ++tile) {
    const int i0 = (tile / tiles_n) * BT::kM, j0 = (tile % tiles_n) * BT::kN;
    if (mma::tile_skipped(s, i0, j0)) continue;
    const mma::KRange kr = mma::k_range(s, i0, k);
    mma::FragC acc[8][BT::kNTiles][32];
    for (int p0 = kr.lo; p0 < kr.hi; p0 += BT::kK) {
      const int kk = kr.hi - p0 < BT::kK ? kr.hi - p0 : BT::kK;
      for (int tid = 0; tid < BT::kThreads; ++tid)
        mma::stage_slice<kTA, kTB>(tid, m, n, i0, j0, p0, kk, A, lda, va, B, ldb, vb, As, Bs);
      for (int warp = 0; warp < 8; ++warp)
        for (int ks = 0; ks < BT::kK; ks += mma::kK) {
          mma::FragA a[32];
          for (int lane = 0; lane < 32; ++lane) a[lane] = mma::warp_a<kTA>(lane, warp, ks, As);
          for (int c = 0; c < BT::kNTiles; ++c) {
            mma::FragB b[32];
            for (int lane = 0; lane < 32; ++lane) b[lane] = mma::warp_b<kTB>(lane, warp, ks, c, Bs);
            emulate_mma(acc[warp][c], a, b);
          }
        }
    }
    for (int warp = 0; warp < 8; ++warp)
      for (int c = 0; c < BT::kNTiles; ++c)
        for (int lane = 0; lane < 32; ++lane)
          mma::store_tile(lane, warp, c, acc[warp][c][lane], m, n, i0, j0, alpha, beta, C, ldc);
  }
}
inline void emulated_block_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A,
                                int lda, const float* B, int ldb, float beta, float* C, int ldc,
                                Structure s = Structure::kDense) {
  if (ta && tb)
    emulated_block_gemm_of<true, true>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
  else if (ta)
    emulated_block_gemm_of<true, false>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
  else if (tb)
    emulated_block_gemm_of<false, true>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
  else
    emulated_block_gemm_of<false, false>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
}

// One thread, the bf16 tensor-core block GEMM of the GPU's bf16 mode emulated lane by lane
// (above): the order of operations CudaExec runs with ChunkGemm::kBf16. Bf16MmaExec takes
// ChunkKernel's serial code paths, Bf16GroupExec its thread-group ones (the segmented
// scan, the batched leaves: what CudaExec runs), on one thread.
template <bool kSerial>
struct Bf16MmaExecOf {
  static constexpr bool serial = kSerial;
  static constexpr bool bf16_operands() { return true; }
  static constexpr int tid() { return 0; }
  static constexpr int nthreads() { return 1; }
  static void sync() {}
  static void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
                   const float* B, int ldb, float beta, float* C, int ldc,
                   Structure s = Structure::kDense) {
    emulated_block_gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
  }
};
using Bf16MmaExec = Bf16MmaExecOf<true>;
using Bf16GroupExec = Bf16MmaExecOf<false>;

}  // namespace gdn::test
