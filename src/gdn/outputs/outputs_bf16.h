// Every chunk's outputs from its entry state in the bf16 mode, after fla's chunk_fwd_o:
// o = s (q_g h + P (u - w h)), one block of eight warps per (batch * value head, chunk,
// column tile) job, with nothing in global memory but the inputs and o. w, q_g and P come
// into shared memory as the bf16 tiles they are stored as (cp.async), h (kept in bf16)
// transposed, so a block needs 69 KiB at K = 128, BV = 64 and three fit an SM. Then:
//  1. v_new = u - w h into shared memory as bf16 v_new^T, and q_g h in the accumulators;
//  2. o = s q_g h + s P v_new, the C-fragments written straight to o's rows.
// The GEMMs and epilogues are ChunkKernel::outputs' on the bf16 block GEMM (bf16_walk.h
// says why that gives its bits): LocalPass::output's part (b) where outputs_kernel would
// run it with a chunk-sized scratch in global memory.
#pragma once

#include <type_traits>

#include "gdn/chunk/bf16_walk.h"

namespace gdn::rwalk {

// bf16 tiles whose rows the fragments read in pairs along k: strides of K + 8 and C + 8
// elements are 4 banks mod 32 apart, so a warp's 32-bit reads hit 32 banks.
struct OutputLayout {
  int K, bv;
  GDN_HD int ldk() const { return K + 8; }   // w, q_g and h^T
  GDN_HD int ldc() const { return kC + 8; }  // P and v_new^T
  GDN_HD std::size_t bytes() const {
    return (std::size_t(kC) * (2 * ldk() + ldc()) + std::size_t(bv) * (ldk() + ldc())) *
           sizeof(Bf16);
  }
  GDN_HD Bf16* w(unsigned char* s) const { return reinterpret_cast<Bf16*>(s); }
  GDN_HD Bf16* qg(unsigned char* s) const { return w(s) + kC * ldk(); }
  GDN_HD Bf16* P(unsigned char* s) const { return qg(s) + kC * ldk(); }
  GDN_HD Bf16* hT(unsigned char* s) const { return P(s) + kC * ldc(); }
  GDN_HD Bf16* vT(unsigned char* s) const { return hT(s) + bv * ldk(); }
};

// Jobs of the output pass: (batch * value head, chunk, column tile).
GDN_HD inline std::int64_t output_jobs(const PassArgs<float>& a, int bv) {
  return std::int64_t(a.B) * a.Hv * a.num_chunks * walk::tiles(a.V, bv);
}

// One job; o is written in bf16 to a.io.o where that is set (o may then be null). The
// warps' accumulators (State::h, its first kMaxChunkTiles) carry q_g h from
// step 1 to step 2.
template <typename Blk>
GDN_HD void outputs(Blk& blk, const PassArgs<float>& a, float* o, int bv, std::int64_t job,
                    unsigned char* smem) {
  const int K = a.K, V = a.V, tiles = walk::tiles(V, bv);
  const std::int64_t per_bh = a.num_chunks * tiles;
  const int bh = int(job / per_bh), b = bh / a.Hv, hv = bh % a.Hv;
  const std::int64_t c = (job % per_bh) / tiles;
  const int c0 = int(job % tiles) * bv;
  const Bf16Factors fl{kC, K, V};
  const float* f = a.factors_of(bh, c);
  const OutputLayout L{K, bv};
  blk.sync();  // the previous job is done with the tiles
  blk.threads([&](int tid) {
    copy_tile(blk, tid, L.w(smem), L.ldk(), fl.w(f), K, kC, K);
    copy_tile(blk, tid, L.qg(smem), L.ldk(), fl.qg(f), K, kC, K);
    copy_tile(blk, tid, L.P(smem), L.ldc(), fl.P(f), kC, kC, kC);
    blk.commit();
    round_tile<true>(tid, L.hT(smem), L.ldk(), a.bf16_entry_state(bh, c) + c0, V, K, bv);
    blk.wait_all();
  });
  blk.sync();
  const Bf16* u = fl.u(f) + c0;
  const Bf16 *w = L.w(smem), *qg = L.qg(smem), *P = L.P(smem), *hT = L.hT(smem);
  Bf16* vT = L.vT(smem);
  const int ldk = L.ldk(), ldc = L.ldc();
  auto h_at = Cols{hT, ldk};
  blk.warps([&](const auto& wp, int warp, auto& st) {
    const Owned t = chunk_tiles(bv, warp);
    Acc<std::remove_cvref_t<decltype(wp)>> vnew[kMaxChunkTiles];
    warp_gemm(wp, t, K, vnew, Rows{w, ldk}, h_at);
    each_element(wp, t, vnew, [&](int i, int j, float& d) {
      vT[j * ldc + i] = to_bf16(mma::epilogue(-1.0f, d, 1.0f, to_float(u[i * V + j])));
    });
    // q_g h into the first tiles of the accumulators, which start at zero.
    each_element(wp, t, st.h, [](int, int, float& x) { x = 0.0f; });
    warp_gemm(wp, t, K, st.h, Rows{qg, ldk}, h_at);
  });
  blk.sync();
  const std::int64_t t0 = std::int64_t(b) * a.Tl + a.chunks[c].begin;
  const int rows = a.chunks[c].rows;
  const std::int64_t at0 = (t0 * a.Hv + hv) * V + c0, ldo = std::int64_t(a.Hv) * V;
  const float s = a.scale;
  blk.warps([&](const auto& wp, int warp, auto& st) {
    const Owned t = chunk_tiles(bv, warp);
    Acc<std::remove_cvref_t<decltype(wp)>> pv[kMaxChunkTiles];
    warp_gemm(wp, t, kC, pv, Rows{P, ldc}, Cols{vT, ldc});
    each_pair(wp, t, st.h, pv, [&](int i, int j, float& qh, float d) {
      if (i >= rows) return;
      const float x = mma::epilogue(s, d, 1.0f, mma::epilogue(s, qh, 0.0f, 0.0f));
      if (a.io.o)  // the bf16 op's o, rounded once as its float o would be
        a.io.o[at0 + i * ldo + j] = to_bf16(x);
      else
        o[at0 + i * ldo + j] = x;
    });
  });
}

}  // namespace gdn::rwalk
