// The forward walks with the state in registers (bf16_walk.h), after fla's
// chunk_fwd_h: LocalPass::output's state walk and transition()'s M and U columns.
// Per chunk c the warps' accumulators hold h (K x bv) and:
//  1. h goes to shared memory once, as bf16 h^T (the B operand of w h), and, in the output
//     pass, to the chunk's entry state;
//  2. v_new = u - w h (C x bv), into shared memory as bf16 v_new^T;
//  3. h <- gamma h + k~^T v_new, in the accumulators.
// Three barriers per chunk. Chunk c + 1's w, k~ and u tiles (bf16) come into the other of
// two stages by cp.async meanwhile. transition's M columns run the same walk with
// M <- gamma M - k~^T (w M): v_new is w M and the update subtracts.
#pragma once

#include "gdn/chunk/bf16_walk.h"

namespace gdn::rwalk {

// kStates: LocalPass::output's state walk, keeping every chunk's entry state.
// kU: transition's U columns (the same walk, nothing kept).
// kM: transition's M columns.
enum class Mode { kStates, kU, kM };

// One job's shared memory: two stages of factor tiles (w, k~ and u's columns), then h^T
// and v_new^T, all bf16. The mma operands' rows are K + 8 or C + 8 elements apart (4 banks
// mod 32), so the eight 16-byte rows of an ldmatrix hit 32 banks; u's, which the epilogues
// read, bv + 8.
struct StateLayout {
  int K, bv;
  GDN_HD int ldw() const { return K + 8; }  // w and k~
  GDN_HD int ldu() const { return bv + 8; }
  GDN_HD int ldh() const { return K + 8; }
  GDN_HD int ldv() const { return kC + 8; }
  GDN_HD std::size_t stage_bytes() const {
    return std::size_t(kC) * (2 * ldw() + ldu()) * sizeof(Bf16);
  }
  GDN_HD std::size_t bytes() const {
    return 2 * stage_bytes() + std::size_t(bv) * (ldh() + ldv()) * sizeof(Bf16);
  }
  GDN_HD Bf16* w(unsigned char* s, int stage) const {
    return reinterpret_cast<Bf16*>(s + stage * stage_bytes());
  }
  GDN_HD Bf16* kt(unsigned char* s, int stage) const { return w(s, stage) + kC * ldw(); }
  GDN_HD Bf16* u(unsigned char* s, int stage) const { return kt(s, stage) + kC * ldw(); }
  GDN_HD Bf16* hT(unsigned char* s) const { return w(s, 2); }
  GDN_HD Bf16* vT(unsigned char* s) const { return hT(s) + bv * ldh(); }
};

// Thread tid's share of copying chunk factors f's tiles into stage `stage`: w and k~
// whole, u's columns [c0, c0 + bv) unless `mode` is kM.
template <typename Blk>
GDN_HD void stage_factors(Blk& blk, int tid, const StateLayout& L, const Bf16Factors& fl,
                          const float* f, int c0, Mode mode, unsigned char* smem, int stage) {
  copy_tile(blk, tid, L.w(smem, stage), L.ldw(), fl.w(f), fl.K, kC, fl.K);
  copy_tile(blk, tid, L.kt(smem, stage), L.ldw(), fl.kt(f), fl.K, kC, fl.K);
  if (mode != Mode::kM)
    copy_tile(blk, tid, L.u(smem, stage), L.ldu(), fl.u(f) + c0, fl.V, kC, L.bv);
}

// v_new (C x bv) = u - w h, or w M for kM, into v_new^T as bf16: store_tile's epilogue
// beta C + alpha acc with step_cols' (1, -1) and compose_cols' (0, 1).
template <typename W>
GDN_HD void make_vnew(const W& w, int warp, const StateLayout& L, const Bf16* ws, const Bf16* us,
                      const Bf16* hT, Bf16* vT, Mode mode) {
  const Owned o = chunk_tiles(L.bv, warp);
  const int ldw = L.ldw(), ldh = L.ldh(), ldu = L.ldu(), ldv = L.ldv();
  Acc<W> acc[kMaxChunkTiles];
  warp_gemm(w, o, L.K, acc, mma::MatrixRows{{ws, ldw}}, Cols{hT, ldh});
  each_element(w, o, acc, [&](int i, int j, float& d) {
    const float v = mode == Mode::kM ? mma::epilogue(1.0f, d, 0.0f, 0.0f)
                                     : mma::epilogue(-1.0f, d, 1.0f, to_float(us[i * ldu + j]));
    vT[j * ldv + i] = to_bf16(v);
  });
}

// h <- gamma h + alpha k~^T v_new in the accumulators (alpha = -1 for kM): store_tile's
// epilogue with beta = gamma, which does not read h where gamma is 0.
template <typename W>
GDN_HD void update_state(const W& w, int warp, State<W>& st, const StateLayout& L, const Bf16* ks,
                         const Bf16* vT, float gamma, float alpha) {
  const Owned o = state_tiles(L.K, L.bv, warp);
  const int ldk = L.ldw(), ldv = L.ldv();
  Acc<W> acc[kMaxTiles];
  warp_gemm(w, o, kC, acc, Cols{ks, ldk},  // (k~^T)(i, p) = k~(p, i)
            Cols{vT, ldv});
  each_pair(w, o, st.h, acc,
            [&](int, int, float& h, float d) { h = mma::epilogue(alpha, d, gamma, h); });
}

// Chunks [first, end) of (batch * value head) bh on the tile in the accumulators, columns
// [c0, c0 + bv); every chunk's entry state into a.states (in bf16) where mode is kStates.
template <typename Blk>
GDN_HD void forward_chunks(Blk& blk, const PassArgs<float>& a, const StateLayout& L, int bh, int c0,
                           std::int64_t first, std::int64_t end, Mode mode, unsigned char* smem) {
  if (first >= end) return;
  const Bf16Factors fl{kC, a.K, a.V};
  const float alpha = mode == Mode::kM ? -1.0f : 1.0f;
  blk.sync();  // the previous segment's last chunk is done with the stages
  blk.threads(
      [&](int tid) { stage_factors(blk, tid, L, fl, a.factors_of(bh, first), c0, mode, smem, 0); });
  blk.commit();
  for (std::int64_t c = first; c < end; ++c) {
    const int stage = int((c - first) % 2);
    blk.wait_all();
    blk.sync();  // chunk c's tiles have landed; chunk c - 1 is done with the other stage
    if (c + 1 < end) {
      blk.threads([&](int tid) {
        stage_factors(blk, tid, L, fl, a.factors_of(bh, c + 1), c0, mode, smem, 1 - stage);
      });
      blk.commit();
    }
    const float gamma = fl.gamma(a.factors_of(bh, c));
    Bf16* entry = mode == Mode::kStates ? a.bf16_entry_state(bh, c) + c0 : nullptr;
    publish_state(blk, L.K, L.bv, L.hT(smem), L.ldh(), entry, a.V);
    blk.sync();
    blk.warps([&](const auto& w, int warp, auto&) {
      make_vnew(w, warp, L, L.w(smem, stage), L.u(smem, stage), L.hT(smem), L.vT(smem), mode);
    });
    blk.sync();
    blk.warps([&](const auto& w, int warp, auto& st) {
      update_state(w, warp, st, L, L.kt(smem, stage), L.vT(smem), gamma, alpha);
    });
  }
}

// walk::state_walk's job: LocalPass::output, part (a).
template <typename Blk>
GDN_HD void state_walk(Blk& blk, const PassArgs<float>& a, const float* h_in, float* ht, int bv,
                       std::int64_t job, unsigned char* smem) {
  const StateLayout L{a.K, bv};
  const walk::Job j = walk::job_of(job, a.V, bv);
  const int b = j.bh / a.Hv, hv = j.bh % a.Hv, K = a.K, V = a.V;
  for (std::int64_t si = 0; si < a.num_segments; ++si) {
    const SliceLayout::Segment s = a.segments[si];
    const int seq = a.seq_of(s, b);
    const float* src = s.starts && a.in.h0 ? a.in.h0 + a.state_offset(seq, hv) + j.c0
                       : !s.starts && h_in ? h_in + std::size_t(j.bh) * K * V + j.c0
                                           : nullptr;
    load_state(blk, K, bv, src, V);
    forward_chunks(blk, a, L, j.bh, j.c0, s.first_chunk, s.first_chunk + s.num_chunks,
                   Mode::kStates, smem);
    if (s.ends && ht) store_state(blk, K, bv, ht + a.state_offset(seq, hv) + j.c0, V);
  }
}

// walk::transition's job: M's columns for t < tiles(K), then U's.
template <typename Blk>
GDN_HD void transition(Blk& blk, const PassArgs<float>& a, float* M, float* U, int bv,
                       std::int64_t job, unsigned char* smem) {
  const int K = a.K, V = a.V, tk = walk::tiles(K, bv), tv = walk::tiles(V, bv);
  const int bh = int(job / (tk + tv)), t = int(job % (tk + tv));
  const int b = bh / a.Hv, h = bh % a.Hv;
  const bool empty = a.num_segments == 0;
  const SliceLayout::Segment s = empty ? SliceLayout::Segment{} : a.segments[a.num_segments - 1];
  const bool affine = empty || !s.starts, of_m = t < tk;
  const int width = of_m ? K : V, c0 = (of_m ? t : t - tk) * bv;
  if (of_m) {  // M = I (the slice continues a sequence, or is empty), else 0
    each_state(blk, K, bv,
               [&](int i, int j, float& m) { m = affine && i == c0 + j ? 1.0f : 0.0f; });
  } else {
    const bool h0 = !empty && !affine && a.in.h0;
    load_state(blk, K, bv, h0 ? a.in.h0 + a.state_offset(a.seq_of(s, b), h) + c0 : nullptr, V);
  }
  if (!empty && (affine || !of_m))
    forward_chunks(blk, a, StateLayout{K, bv}, bh, c0, s.first_chunk, s.first_chunk + s.num_chunks,
                   of_m ? Mode::kM : Mode::kU, smem);
  float* out = (of_m ? M + std::size_t(bh) * K * K : U + std::size_t(bh) * K * V) + c0;
  store_state(blk, K, bv, out, width);
}

}  // namespace gdn::rwalk
