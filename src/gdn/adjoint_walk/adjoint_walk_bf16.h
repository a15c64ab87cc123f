// The backward's walks with the adjoint in registers (bf16_walk.h), after fla's
// chunk_bwd_dhu: LocalPass::adjoint (backward phase 1) and backward part (a). Per chunk c,
// last to first, the warps' accumulators hold mu (K x bv) and:
//  1. mu goes to shared memory once, as bf16 mu^T (the B operand of k~ mu), and, in the
//     backward, to the chunk's exit adjoint;
//  2. dv_new = k~ mu + s P^T dO (C x bv), into shared memory as bf16 dv_new^T, and
//     mu <- gamma mu + s q_g^T dO in the accumulators;
//  3. mu <- mu - w^T dv_new.
// Four barriers per chunk. One stage of tiles (k~, q_g, w and P in bf16, as the factors
// store them; dO's columns in fp32): k~, q_g, P and dO are free after step 2 and take
// chunk c - 1's by cp.async while step 3 runs; w, free after step 3, takes its during the
// next chunk's step 1.
#pragma once

#include "gdn/chunk/bf16_walk.h"

namespace gdn::rwalk {

// One job's shared memory: the factor tiles in bf16 (rows K + 8 or C + 8 apart: the eight
// 16-byte rows of an ldmatrix hit 32 banks), dO's columns in fp32, then mu^T, dv_new^T and
// dO^T in bf16. dO, which both GEMMs of step 2 read down its columns, is rounded once into
// dO^T, whose pairs along k are then 32-bit loads.
struct AdjointLayout {
  int K, bv;
  GDN_HD int ldk() const { return K + 8; }  // k~, q_g and w
  GDN_HD int ldp() const { return kC + 8; }
  GDN_HD int ldo() const { return bv + 4; }    // dO in fp32
  GDN_HD int ldo16() const { return bv + 8; }  // or in bf16 (Bf16Io::dO), in the same space
  GDN_HD int ldh() const { return K + 8; }
  GDN_HD int ldv() const { return kC + 8; }
  GDN_HD std::size_t factor_bytes() const {
    return std::size_t(kC) * (3 * ldk() + ldp()) * sizeof(Bf16);
  }
  GDN_HD std::size_t bytes() const {
    return factor_bytes() + std::size_t(kC) * ldo() * sizeof(float) +
           std::size_t(bv) * (ldh() + 2 * ldv()) * sizeof(Bf16);
  }
  GDN_HD Bf16* kt(unsigned char* s) const { return reinterpret_cast<Bf16*>(s); }
  GDN_HD Bf16* qg(unsigned char* s) const { return kt(s) + kC * ldk(); }
  GDN_HD Bf16* w(unsigned char* s) const { return qg(s) + kC * ldk(); }
  GDN_HD Bf16* P(unsigned char* s) const { return w(s) + kC * ldk(); }
  GDN_HD float* dO(unsigned char* s) const { return reinterpret_cast<float*>(s + factor_bytes()); }
  GDN_HD Bf16* dO16(unsigned char* s) const { return reinterpret_cast<Bf16*>(dO(s)); }
  GDN_HD Bf16* muT(unsigned char* s) const { return reinterpret_cast<Bf16*>(dO(s) + kC * ldo()); }
  GDN_HD Bf16* dvT(unsigned char* s) const { return muT(s) + bv * ldh(); }
  GDN_HD Bf16* dOT(unsigned char* s) const { return dvT(s) + bv * ldv(); }
};

// Where one chunk's rows of dO's job columns are: `rows` rows `stride` apart from src, or
// from src16 where dO is bf16 (Bf16Io::dO).
struct ChunkRowsAt {
  const float* src;
  const Bf16* src16;
  std::int64_t stride;
  int rows;
};

// Thread tid's share of copying what steps 1 and 2 read: k~, q_g, P and dO's columns
// (zero past the chunk's rows).
template <typename Blk>
GDN_HD void stage_front(Blk& blk, int tid, const AdjointLayout& L, const Bf16Factors& fl,
                        const float* f, const ChunkRowsAt& dO, unsigned char* smem) {
  copy_tile(blk, tid, L.kt(smem), L.ldk(), fl.kt(f), fl.K, kC, fl.K);
  copy_tile(blk, tid, L.qg(smem), L.ldk(), fl.qg(f), fl.K, kC, fl.K);
  copy_tile(blk, tid, L.P(smem), L.ldp(), fl.P(f), kC, kC, kC);
  if (dO.src16) {
    copy_tile(blk, tid, L.dO16(smem), L.ldo16(), dO.src16, dO.stride, dO.rows, L.bv);
    Bf16* pad = L.dO16(smem) + dO.rows * L.ldo16();
    for (int x = tid; x < (kC - dO.rows) * L.bv; x += kThreads)
      pad[(x / L.bv) * L.ldo16() + x % L.bv] = Bf16{};
  } else {
    copy_tile(blk, tid, L.dO(smem), L.ldo(), dO.src, dO.stride, dO.rows, L.bv);
    float* pad = L.dO(smem) + dO.rows * L.ldo();
    for (int x = tid; x < (kC - dO.rows) * L.bv; x += kThreads)
      pad[(x / L.bv) * L.ldo() + x % L.bv] = 0.0f;
  }
}

// Step 2 of one warp. dv_new's epilogue is adjoint_cols' two block GEMMs' in turn,
// (beta, alpha) = (0, 1) then (1, s); mu's is (gamma, s).
template <typename W>
GDN_HD void adjoint_step(const W& w, int warp, State<W>& st, const AdjointLayout& L,
                         unsigned char* smem, float gamma, float s) {
  const Bf16 *kt = L.kt(smem), *qg = L.qg(smem), *P = L.P(smem);
  const Bf16 *muT = L.muT(smem), *dOT = L.dOT(smem);
  Bf16* dvT = L.dvT(smem);
  const int ldk = L.ldk(), ldp = L.ldp(), ldh = L.ldh(), ldv = L.ldv();
  const Cols dO_at{dOT, ldv};  // dO (p, j) = dO^T[j][p]
  {
    const Owned o = chunk_tiles(L.bv, warp);
    Acc<W> kmu[kMaxChunkTiles], pdo[kMaxChunkTiles];
    warp_gemm(w, o, L.K, kmu, mma::MatrixRows{{kt, ldk}}, Cols{muT, ldh});
    warp_gemm(w, o, kC, pdo, Cols{P, ldp}, dO_at);
    each_pair(w, o, kmu, pdo, [&](int i, int j, float& a, float b) {
      dvT[j * ldv + i] = to_bf16(mma::epilogue(s, b, 1.0f, mma::epilogue(1.0f, a, 0.0f, 0.0f)));
    });
  }
  const Owned o = state_tiles(L.K, L.bv, warp);
  Acc<W> qdo[kMaxTiles];
  warp_gemm(w, o, kC, qdo, Cols{qg, ldk}, dO_at);
  each_pair(w, o, st.h, qdo,
            [&](int, int, float& mu, float d) { mu = mma::epilogue(s, d, gamma, mu); });
}

// Step 3 of one warp: mu <- mu - w^T dv_new, (beta, alpha) = (1, -1).
template <typename W>
GDN_HD void adjoint_subtract(const W& w, int warp, State<W>& st, const AdjointLayout& L,
                             unsigned char* smem) {
  const Bf16* ws = L.w(smem);
  const Bf16* dvT = L.dvT(smem);
  const int ldk = L.ldk(), ldv = L.ldv();
  const Owned o = state_tiles(L.K, L.bv, warp);
  Acc<W> acc[kMaxTiles];
  warp_gemm(w, o, kC, acc, Cols{ws, ldk}, Cols{dvT, ldv});
  each_pair(w, o, st.h, acc,
            [&](int, int, float& mu, float d) { mu = mma::epilogue(-1.0f, d, 1.0f, mu); });
}

// The chunks of segment s, last to first, on the adjoint in the accumulators (job j's
// columns), storing each chunk's exit adjoint into a.adjoints where `keep` is set
// (walk::adjoint_segment).
template <typename Blk>
GDN_HD void adjoint_chunks(Blk& blk, const PassArgs<float>& a, const AdjointLayout& L,
                           const walk::Job& j, const SliceLayout::Segment& s, const float* dO,
                           bool keep, unsigned char* smem) {
  if (s.num_chunks == 0) return;
  const Bf16Factors fl{kC, a.K, a.V};
  const int b = j.bh / a.Hv, hv = j.bh % a.Hv;
  auto rows_of = [&](std::int64_t c) {
    const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
    const std::int64_t at = (t * a.Hv + hv) * a.V + j.c0;
    return ChunkRowsAt{a.io.dO ? nullptr : dO + at, a.io.dO ? a.io.dO + at : nullptr,
                       std::int64_t(a.Hv) * a.V, a.chunks[c].rows};
  };
  auto front = [&](std::int64_t c) {
    blk.threads(
        [&](int tid) { stage_front(blk, tid, L, fl, a.factors_of(j.bh, c), rows_of(c), smem); });
  };
  auto back = [&](std::int64_t c) {
    blk.threads([&](int tid) {
      copy_tile(blk, tid, L.w(smem), L.ldk(), fl.w(a.factors_of(j.bh, c)), a.K, kC, a.K);
    });
  };
  const std::int64_t first = s.first_chunk, last = s.first_chunk + s.num_chunks - 1;
  blk.sync();  // the previous segment's last chunk is done with the tiles
  front(last);
  back(last);
  blk.commit();
  for (std::int64_t c = last; c >= first; --c) {
    blk.wait_all();
    blk.sync();  // chunk c's tiles have landed
    publish_state(blk, L.K, L.bv, L.muT(smem), L.ldh(),
                  keep ? a.bf16_exit_adjoint(j.bh, c) + j.c0 : nullptr, a.V);
    blk.threads([&](int tid) {  // dO^T in bf16 (its zero padding rows included)
      if (a.io.dO)
        round_tile<true>(tid, L.dOT(smem), L.ldv(), L.dO16(smem), L.ldo16(), kC, L.bv);
      else
        round_tile<true>(tid, L.dOT(smem), L.ldv(), L.dO(smem), L.ldo(), kC, L.bv);
    });
    blk.sync();
    const float gamma = fl.gamma(a.factors_of(j.bh, c));
    blk.warps([&](const auto& w, int warp, auto& st) {
      adjoint_step(w, warp, st, L, smem, gamma, a.scale);
    });
    blk.sync();  // dv_new^T is complete; k~, q_g, P and dO are free
    if (c > first) {
      front(c - 1);
      blk.commit();
    }
    blk.warps([&](const auto& w, int warp, auto& st) { adjoint_subtract(w, warp, st, L, smem); });
    blk.sync();  // w is free
    if (c > first) {
      back(c - 1);
      blk.commit();
    }
  }
}

// walk::adjoint's job: LocalPass::adjoint, D = dLoss/dh_in from a zero exit adjoint.
template <typename Blk>
GDN_HD void adjoint(Blk& blk, const PassArgs<float>& a, const float* dO, const float* dht, float* D,
                    int bv, std::int64_t job, unsigned char* smem) {
  const int K = a.K, V = a.V;
  const walk::Job j = walk::job_of(job, V, bv);
  const int b = j.bh / a.Hv, hv = j.bh % a.Hv;
  const bool carries = a.num_segments > 0 && !a.segments[0].starts;
  const SliceLayout::Segment s = carries ? a.segments[0] : SliceLayout::Segment{};
  const bool from_dht = carries && s.ends && dht;
  load_state(blk, K, bv, from_dht ? dht + a.state_offset(a.seq_of(s, b), hv) + j.c0 : nullptr, V);
  if (carries) adjoint_chunks(blk, a, AdjointLayout{K, bv}, j, s, dO, false, smem);
  store_state(blk, K, bv, D + std::size_t(j.bh) * K * V + j.c0, V);
}

// walk::backward_walk's job: backward part (a), every chunk's exit adjoint and dh0.
template <typename Blk>
GDN_HD void backward_walk(Blk& blk, const PassArgs<float>& a, const float* lambda, const float* dO,
                          const float* dht, float* dh0, int bv, std::int64_t job,
                          unsigned char* smem) {
  const int K = a.K, V = a.V;
  const walk::Job j = walk::job_of(job, V, bv);
  const int b = j.bh / a.Hv, hv = j.bh % a.Hv;
  for (std::int64_t si = a.num_segments - 1; si >= 0; --si) {
    const SliceLayout::Segment s = a.segments[si];
    const int seq = a.seq_of(s, b);
    const float* src = s.ends && dht       ? dht + a.state_offset(seq, hv) + j.c0
                       : !s.ends && lambda ? lambda + std::size_t(j.bh) * K * V + j.c0
                                           : nullptr;
    load_state(blk, K, bv, src, V);
    adjoint_chunks(blk, a, AdjointLayout{K, bv}, j, s, dO, true, smem);
    if (s.starts && dh0) store_state(blk, K, bv, dh0 + a.state_offset(seq, hv) + j.c0, V);
  }
}

}  // namespace gdn::rwalk
