// The walks of the CUDA passes in the bf16 mode with the walked matrix in registers, after
// fla's chunk_fwd_h and chunk_bwd_dhu: the common parts. One block of eight warps per
// (batch * value head, column tile) job, as in walk_tiles.h, but the K x bv tile (the
// state h, transition's M, or the adjoint mu) lives in its warps' mma accumulators (fp32)
// from the first chunk of the job to the last, and the chunks' factor tiles come into
// shared memory by cp.async while the warps compute. state_walk_bf16.h holds the
// forward walks, adjoint_walk_bf16.h the backward's; prepare_bf16.h and
// outputs_bf16.h the chunk-parallel kernels beside them, on the same parts.
//
// Their mma steps run in the k order of CudaExec's bf16 block GEMM and their epilogues are
// its own (mma::epilogue, beta C + alpha acc with the tiled walk's alpha and beta, every
// operation rounded on its own, no FMA), so they give the tiled kernels' bits, on the GPU
// as on the CPU: tests/unit/test_register_walk.cpp runs this very source with emulated
// warps against walk::* and ChunkKernel on the emulated block GEMM and checks that
// equality.
//
// Written against a block policy Blk (the GPU's in gdn/chunk/bf16_launch.cuh, the emulation in
// the test):
//   warps(f): f(w, warp index, that warp's State<W>) for each warp the caller runs, with w
//     a warp policy W: Reg<T> (one lane's T on the GPU, every lane's when emulated),
//     make(f) -> Reg<R> with R = f(lane), each(f), at(reg, lane), mma(d, a, b) (d += a b)
//   threads(f): f(tid) for each thread the caller runs
//   sync(): a barrier; copy16(dst, src): 16 bytes, asynchronous; commit(); wait_all()
// The chunks' factors are Bf16Factors blocks (gdn/chunk/bf16_factors.h): w, k~, q_g, P and u
// come into shared memory as the bf16 tiles they are stored as.
// docs/design.md §2f.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/bf16.h"
#include "core/hd.h"
#include "gdn/chunk/bf16_factors.h"
#include "gdn/chunk/chunk_kernel.h"
#include "gdn/chunk/pass_args.h"
#include "gdn/chunk/walk_tiles.h"
#include "ops/mma/block_gemm_bf16.h"
#include "ops/mma/mma_fragments.h"

namespace gdn::rwalk {

constexpr int kThreads = 256, kWarps = 8, kC = 64;
constexpr int kMaxTiles = 8;       // 16 x 8 tiles per warp of a K x bv tile (K = 128, bv = 64)
constexpr int kMaxChunkTiles = 4;  // of a C x bv tile (bv = 64)

// Whether a job of this shape runs here; the tiled walks take the rest. `width` is the
// walked matrix's column count (V, or K for M).
GDN_HD inline bool supported(int C, int K, int width, int bv) {
  return C == kC && (K == 64 || K == 128) && (bv == 32 || bv == 64) && width % bv == 0;
}
// Whether the register prepare (gdn/prepare/prepare_bf16.h) and the backward's chunk
// kernels run here (C = 64, K = 64 or 128, V a multiple of 64).
GDN_HD inline bool prepare_supported(int C, int K, int V) {
  return C == kC && (K == 64 || K == 128) && V % 64 == 0 && V > 0;
}

// A warp's 16 x 8 tiles of a matrix: rows r0 + [0, 16), columns j0 + 8 c for c < tiles.
struct Owned {
  int r0, j0, tiles;
};
// Of the K x bv tile: K / 16 row blocks, the warps left over split the columns.
GDN_HD inline Owned state_tiles(int K, int bv, int warp) {
  const int rows = K / 16, width = bv / (kWarps / rows);
  return {16 * (warp % rows), width * (warp / rows), width / 8};
}
// Of a C x bv tile: four row blocks, two column halves.
GDN_HD inline Owned chunk_tiles(int bv, int warp) {
  return {16 * (warp % 4), (bv / 2) * (warp / 4), bv / 16};
}

template <typename W>
using Acc = typename W::template Reg<mma::FragC>;

// The walked K x bv tile of one warp.
template <typename W>
struct State {
  Acc<W> h[kMaxTiles];
};

// acc[c] += A B over the warp's tiles o, k in steps of 16 in order: A's rows o.r0 + [0, 16)
// by a(i, p), B's columns o.j0 + 8 c + [0, 8) by b(p, j), p in [0, k), rounded to bf16.
template <int kTiles, typename W, typename At, typename Bt>
GDN_HD void warp_gemm(const W& w, const Owned& o, int k, Acc<W> (&acc)[kTiles], At a, Bt b) {
  GDN_UNROLL_BY(2)  // two k steps per iteration: the address arithmetic is shared
  for (int ks = 0; ks < k; ks += mma::kK) {
    const auto ao = mma::offset(a, o.r0, ks);
    const auto fa = w.make([&](int lane) { return mma::load_a(lane, ao); });
    GDN_UNROLL
    for (int c = 0; c < kTiles; ++c)
      if (c < o.tiles) {
        const int j0 = o.j0 + 8 * c;
        const auto bo = mma::offset(b, ks, j0);
        const auto fb = w.make([&](int lane) { return mma::load_b(lane, bo); });
        w.mma(acc[c], fa, fb);
      }
  }
}

// bf16 tiles in shared memory as warp_gemm operands (ops/mma/mma_fragments.h).
using mma::Cols;
using mma::Rows;

// f(i, j, value&) for every element of the warp's tiles o of acc, lane by lane.
template <int kTiles, typename W, typename F>
GDN_HD void each_element(const W& w, const Owned& o, Acc<W> (&acc)[kTiles], F f) {
  GDN_UNROLL
  for (int c = 0; c < kTiles; ++c)
    if (c < o.tiles)
      w.each([&](int lane) {
        mma::FragC& frag = w.at(acc[c], lane);
        for (int e = 0; e < 4; ++e)
          f(o.r0 + mma::c_row(lane, e), o.j0 + 8 * c + mma::c_col(lane, e), frag.c[e]);
      });
}

// f(i, j, x&, y) for every element of the warp's tiles o of x, with y the same element of y.
template <int kX, int kY, typename W, typename F>
GDN_HD void each_pair(const W& w, const Owned& o, Acc<W> (&x)[kX], Acc<W> (&y)[kY], F f) {
  GDN_UNROLL
  for (int c = 0; c < (kX < kY ? kX : kY); ++c)
    if (c < o.tiles)
      w.each([&](int lane) {
        mma::FragC& fx = w.at(x[c], lane);
        const mma::FragC& fy = w.at(y[c], lane);
        for (int e = 0; e < 4; ++e)
          f(o.r0 + mma::c_row(lane, e), o.j0 + 8 * c + mma::c_col(lane, e), fx.c[e], fy.c[e]);
      });
}

// f(i, j, value&) for every element of the walked tile.
template <typename Blk, typename F>
GDN_HD void each_state(Blk& blk, int K, int bv, F f) {
  blk.warps([&](const auto& w, int warp, auto& st) {
    each_element(w, state_tiles(K, bv, warp), st.h, f);
  });
}

// The walked tile from src (leading dimension ld, at the tile's first column), zero where
// src is null; and into dst.
template <typename Blk>
GDN_HD void load_state(Blk& blk, int K, int bv, const float* src, std::int64_t ld) {
  each_state(blk, K, bv, [&](int i, int j, float& h) { h = src ? src[i * ld + j] : 0.0f; });
}
template <typename Blk>
GDN_HD void store_state(Blk& blk, int K, int bv, float* dst, std::int64_t ld) {
  each_state(blk, K, bv, [&](int i, int j, float& h) { dst[i * ld + j] = h; });
}

// The walked tile rounded to bf16 into tT (its transpose: the B operand of the next
// products, pairs along k adjacent) with leading dimension ldt, and into dst (leading
// dimension ld, the kept entry state or exit adjoint) where dst is set.
template <typename Blk>
GDN_HD void publish_state(Blk& blk, int K, int bv, Bf16* tT, int ldt, Bf16* dst, std::int64_t ld) {
  each_state(blk, K, bv, [&](int i, int j, float& h) {
    const Bf16 x = to_bf16(h);
    tT[j * ldt + i] = x;
    if (dst) dst[i * ld + j] = x;
  });
}

// Thread tid's share of copying rows x width elements E (floats or bf16; 16-byte pieces,
// so rows of 16-byte multiples at 16-byte-aligned addresses) from src (leading dimension
// lds) into dst (leading dimension ldd).
template <typename Blk, typename E>
GDN_HD void copy_tile(Blk& blk, int tid, E* dst, int ldd, const E* src, std::int64_t lds, int rows,
                      int width) {
  constexpr int kPiece = 16 / int(sizeof(E));
  const int q = width / kPiece;
  for (int x = tid; x < rows * q; x += kThreads) {
    const int i = x / q, c = kPiece * (x % q);
    blk.copy16(dst + i * ldd + c, src + i * lds + c);
  }
}

GDN_HD inline Bf16 as_bf16(float x) {
  return to_bf16(x);
}
GDN_HD inline Bf16 as_bf16(Bf16 x) {
  return x;
}

// Thread tid's share of rounding rows x width elements (floats, or bf16 already) of src
// (leading dimension lds) into dst (leading dimension ldd), or their transpose
// (dst[j * ldd + i] = src(i, j)).
template <bool kTranspose, typename E>
GDN_HD void round_tile(int tid, Bf16* dst, int ldd, const E* src, std::int64_t lds, int rows,
                       int width) {
  for (int x = tid; x < rows * width; x += kThreads) {
    const int i = x / width, j = x % width;
    dst[kTranspose ? j * ldd + i : i * ldd + j] = as_bf16(src[i * lds + j]);
  }
}

}  // namespace gdn::rwalk
