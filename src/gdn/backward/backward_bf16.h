// Every chunk's backward in the bf16 mode, after fla's split of it (chunk_bwd_dv_local,
// chunk_bwd_dqkwg, prepare_wy_bwd): two kernels of one block of eight warps per
// (batch * value head, chunk) job, with no scratch in shared or global memory beyond what
// they hand each other (BackwardHandoff, a third of the chunk's factor block). The
// CudaExec kernel they replace ran ChunkKernel::backward in a 0.9 MB workspace per block.
//
//  1. backward_products, from the chunk's entry state h and exit adjoint dh (in bf16, as
//     the walks keep them; the products that contract over V, or need the states):
//     v_new = u - w h, du = dv_new = k~ dh + s P^T dO, then dk~ = v_new dh^T and X = s dO h^T into the dk and dq rows
//     (finished by part 2), dw = -du h^T, dP = s dO v_new^T and dgamma = <h, dh> to the
//     handoff. 163 KiB of shared memory at K = V = 128.
//  2. backward_wy, from the rows, the handoff and T = (I + L)^{-1} from prepare's factors
//     (the WY representation and the gates): the gate scan, k k^T and q k^T, then dq, dk,
//     dT's products dVb = T^T du and dKb = T^T dw, dL, and the row sums that make dbeta
//     and dg. 210 KiB.
//
// The entry adjoint that ChunkKernel::backward also returns is the adjoint walk's, so its
// three products are not made. The rest are ChunkKernel::backward's GEMMs in its k order
// with its epilogues, and its elementwise steps written as it writes them, so the outputs
// are its bits on the bf16 block GEMM (bf16_walk.h says why; tests/unit/
// test_register_walk.cpp checks it). docs/design.md §2f.
#pragma once

#include <type_traits>

#include "gdn/chunk/row_math.h"
#include "gdn/prepare/prepare_bf16.h"

namespace gdn::rwalk {

// What part 1 hands part 2 per job, in a float block of floats() elements: dP (C x C,
// fp32), dgamma, then du (C x V) and dw (C x K) in bf16, the only form part 2's products
// read them in.
struct BackwardHandoff {
  int K, V;
  GDN_HD std::size_t floats() const {
    return std::size_t(kC) * kC + 4 + std::size_t(kC) * (V + K) / 2;
  }
  GDN_HD float* dP(float* h) const { return h; }
  GDN_HD float* dgamma(float* h) const { return h + kC * kC; }
  GDN_HD Bf16* du(float* h) const { return reinterpret_cast<Bf16*>(h + kC * kC + 4); }
  GDN_HD Bf16* dw(float* h) const { return du(h) + kC * V; }
};

// Part 1's shared memory, bf16 tiles: h and dh (K x V, as the walks keep them), dO, v_new
// and du (C x V), w and k~ (C x K), P (C x C); then <h_i, dh_i> per row i of the states.
struct ProductsLayout {
  int K, V;
  GDN_HD int ldv() const { return V + 8; }
  GDN_HD int ldk() const { return K + 8; }
  GDN_HD int ldc() const { return kC + 8; }
  GDN_HD std::size_t bytes() const {
    return (std::size_t(2 * K + 3 * kC) * ldv() + std::size_t(2) * kC * ldk() +
            std::size_t(kC) * ldc()) *
               sizeof(Bf16) +
           std::size_t(K) * sizeof(float);
  }
  GDN_HD Bf16* h(unsigned char* s) const { return reinterpret_cast<Bf16*>(s); }
  GDN_HD Bf16* dh(unsigned char* s) const { return h(s) + K * ldv(); }
  GDN_HD Bf16* dO(unsigned char* s) const { return dh(s) + K * ldv(); }
  GDN_HD Bf16* vnew(unsigned char* s) const { return dO(s) + kC * ldv(); }
  GDN_HD Bf16* du(unsigned char* s) const { return vnew(s) + kC * ldv(); }
  GDN_HD Bf16* w(unsigned char* s) const { return du(s) + kC * ldv(); }
  GDN_HD Bf16* kt(unsigned char* s) const { return w(s) + kC * ldk(); }
  GDN_HD Bf16* P(unsigned char* s) const { return kt(s) + kC * ldk(); }
  GDN_HD float* hdh(unsigned char* s) const { return reinterpret_cast<float*>(P(s) + kC * ldc()); }
};

// Where job's rows of the per-value-head dq and dk scratch ([G, B, Tl, Hk, K]) start.
GDN_HD inline std::int64_t head_rows(const PassArgs<float>& a, int bh, const RowsAt& at) {
  return std::int64_t((bh % a.Hv) % a.G) * a.B * a.Tl * a.Hk * a.K + at.qk;
}

// Part 1 of job: dk~ into dkv's rows and X into dqv's (the real rows), the rest to ho_block.
template <typename Blk>
GDN_HD void backward_products(Blk& blk, const PassArgs<float>& a, const float* dO, float* dqv,
                              float* dkv, float* ho_block, std::int64_t job, unsigned char* smem) {
  const int K = a.K, V = a.V, bh = int(job / a.num_chunks);
  const std::int64_t c = job % a.num_chunks;
  const RowsAt at = rows_at(a, bh, c);
  const Bf16Factors fl{kC, K, V};
  const float* f = a.factors_of(bh, c);
  const Bf16 *h = a.bf16_entry_state(bh, c), *dh = a.bf16_exit_adjoint(bh, c);
  const ProductsLayout Ly{K, V};
  const BackwardHandoff ho{K, V};
  const int ldv = Ly.ldv(), ldk = Ly.ldk(), ldc = Ly.ldc();
  Bf16 *hb = Ly.h(smem), *dhb = Ly.dh(smem), *dOb = Ly.dO(smem), *vn = Ly.vnew(smem);
  Bf16 *dub = Ly.du(smem), *wb = Ly.w(smem), *ktb = Ly.kt(smem), *Pb = Ly.P(smem);
  float* hdh = Ly.hdh(smem);
  blk.sync();  // the previous job is done with shared memory
  blk.threads([&](int tid) {
    copy_tile(blk, tid, wb, ldk, fl.w(f), K, kC, K);
    copy_tile(blk, tid, ktb, ldk, fl.kt(f), K, kC, K);
    copy_tile(blk, tid, Pb, ldc, fl.P(f), kC, kC, kC);
    copy_tile(blk, tid, hb, ldv, h, V, K, V);
    copy_tile(blk, tid, dhb, ldv, dh, V, K, V);
    blk.commit();
    for (int x = tid; x < kC * V; x += kThreads) {
      const int i = x / V, d = x % V;
      const std::int64_t x_at = at.v + i * at.v_stride + d;
      dOb[i * ldv + d] = i >= at.rows ? Bf16{} : a.io.dO ? a.io.dO[x_at] : to_bf16(dO[x_at]);
    }
    blk.wait_all();
  });
  blk.sync();
  blk.threads([&](int tid) {
    for (int i = tid; i < K; i += kThreads)
      hdh[i] = row_dot(Bf16Row{hb + i * ldv}, Bf16Row{dhb + i * ldv}, V);
  });
  const float s = a.scale;
  const Bf16* u = fl.u(f);
  Bf16* du_out = ho.du(ho_block);
  // v_new = u - w h, and du = k~ dh + s P^T dO: 64 columns of V at a time.
  blk.warps([&](const auto& w, int warp, auto&) {
    using W = std::remove_cvref_t<decltype(w)>;
    for (int cb = 0; cb < V; cb += 64) {
      Owned o = chunk_tiles(64, warp);
      o.j0 += cb;
      Acc<W> wh[kMaxChunkTiles], kd[kMaxChunkTiles], pd[kMaxChunkTiles];
      warp_gemm(w, o, K, wh, Rows{wb, ldk}, Rows{hb, ldv});
      each_element(w, o, wh, [&](int i, int j, float& d) {
        vn[i * ldv + j] = to_bf16(mma::epilogue(-1.0f, d, 1.0f, to_float(u[i * V + j])));
      });
      warp_gemm(w, o, K, kd, Rows{ktb, ldk}, Rows{dhb, ldv});
      warp_gemm(w, o, kC, pd, Cols{Pb, ldc}, Rows{dOb, ldv});
      each_pair(w, o, pd, kd, [&](int i, int j, float& pdo, float kdh) {
        const Bf16 x = to_bf16(mma::epilogue(s, pdo, 1.0f, mma::epilogue(1.0f, kdh, 0.0f, 0.0f)));
        dub[i * ldv + j] = x;
        du_out[i * V + j] = x;
      });
    }
  });
  blk.sync();  // every row's <h_i, dh_i> is in
  blk.threads([&](int tid) {
    if (tid != 0) return;
    float dgamma = 0.0f;  // ChunkKernel::backward's tail sums the rows in this order
    for (int i = 0; i < K; ++i) dgamma += hdh[i];
    *ho.dgamma(ho_block) = dgamma;
  });
  blk.sync();
  // Over V: dk~ = v_new dh^T, X = s dO h^T, dw = -du h^T (64 columns of K at a time), and
  // dP = s dO v_new^T.
  const std::int64_t rows0 = head_rows(a, bh, at), ld = at.qk_stride;
  float *dkt = dkv + rows0, *X = dqv + rows0, *dP = ho.dP(ho_block);
  Bf16* dw_out = ho.dw(ho_block);
  const int rows = at.rows;
  blk.warps([&](const auto& w, int warp, auto&) {
    using W = std::remove_cvref_t<decltype(w)>;
    for (int cb = 0; cb < K; cb += 64) {
      Owned o = chunk_tiles(64, warp);
      o.j0 += cb;
      Acc<W> acc[kMaxChunkTiles];
      warp_gemm(w, o, V, acc, Rows{vn, ldv}, Cols{dhb, ldv});
      each_element(w, o, acc, [&](int i, int j, float& d) {
        if (i < rows) dkt[i * ld + j] = mma::epilogue(1.0f, d, 0.0f, 0.0f);
      });
      Acc<W> x[kMaxChunkTiles];
      warp_gemm(w, o, V, x, Rows{dOb, ldv}, Cols{hb, ldv});
      each_element(w, o, x, [&](int i, int j, float& d) {
        if (i < rows) X[i * ld + j] = mma::epilogue(s, d, 0.0f, 0.0f);
      });
      Acc<W> dw[kMaxChunkTiles];
      warp_gemm(w, o, V, dw, Rows{dub, ldv}, Cols{hb, ldv});
      each_element(w, o, dw, [&](int i, int j, float& d) {
        dw_out[i * K + j] = to_bf16(mma::epilogue(-1.0f, d, 0.0f, 0.0f));
      });
    }
    const Owned o = chunk_tiles(64, warp);
    Acc<W> acc[kMaxChunkTiles];
    warp_gemm(w, o, V, acc, Rows{dOb, ldv}, Cols{vn, ldv});
    each_element(w, o, acc,
                 [&](int i, int j, float& d) { dP[i * kC + j] = mma::epilogue(s, d, 0.0f, 0.0f); });
  });
}

// Part 2's per-row vectors beyond the gates'.
enum WyVec { kDGam = kGateVecs, kDBeta, kDg, kRedC, kWyVecs };

// Part 2's shared memory: k, q (bf16 rows); two bf16 C x C tiles (dP .* D, then
// dL + dL^T; T); a bf16 region for du and dw, then u and w; three fp32 C x C tiles (dL,
// then D; k k^T; dD); dVb and dKb in fp32; the per-row vectors.
struct WyLayout {
  int K, V;
  GDN_HD int ldk() const { return K + 8; }  // k, q, dw, w (bf16)
  GDN_HD int ldv() const { return V + 8; }  // du, u (bf16)
  GDN_HD int ldt() const { return kC + 8; }
  GDN_HD int ldvf() const { return V + 4; }  // dVb (fp32)
  GDN_HD int ldkf() const { return K + 4; }  // dKb (fp32)
  GDN_HD std::size_t bytes() const {
    return (std::size_t(2) * kC * ldk() + std::size_t(2) * kC * ldt() +
            std::size_t(kC) * (ldv() + ldk())) *
               sizeof(Bf16) +
           (std::size_t(3) * kC * ldt() + std::size_t(kC) * (ldvf() + ldkf()) +
            std::size_t(kWyVecs) * kC) *
               sizeof(float);
  }
  GDN_HD Bf16* k(unsigned char* s) const { return reinterpret_cast<Bf16*>(s); }
  GDN_HD Bf16* q(unsigned char* s) const { return k(s) + kC * ldk(); }
  GDN_HD Bf16* cc(unsigned char* s) const { return q(s) + kC * ldk(); }
  GDN_HD Bf16* T(unsigned char* s) const { return cc(s) + kC * ldt(); }
  GDN_HD Bf16* dv(unsigned char* s) const { return T(s) + kC * ldt(); }   // du, then u
  GDN_HD Bf16* dk(unsigned char* s) const { return dv(s) + kC * ldv(); }  // dw, then w
  GDN_HD float* tile(unsigned char* s, int i) const {  // 0: dL / D, 1: k k^T, 2: dD
    return reinterpret_cast<float*>(dk(s) + kC * ldk()) + i * kC * ldt();
  }
  GDN_HD float* dVb(unsigned char* s) const { return tile(s, 3); }
  GDN_HD float* dKb(unsigned char* s) const { return dVb(s) + kC * ldvf(); }
  GDN_HD float* vec(unsigned char* s, int i) const { return dKb(s) + kC * ldkf() + i * kC; }
};

// Part 2 of job: dq and dk into their rows of dqv and dkv (over part 1's X and dk~), dv,
// dg and dbeta into gr's rows.
template <typename Blk>
GDN_HD void backward_wy(Blk& blk, const PassArgs<float>& a, const GdnGradView<float>& gr,
                        float* dqv, float* dkv, float* ho_block, std::int64_t job,
                        unsigned char* smem) {
  const int K = a.K, V = a.V, bh = int(job / a.num_chunks);
  const std::int64_t c = job % a.num_chunks;
  const RowsAt at = rows_at(a, bh, c);
  const Bf16Factors fl{kC, K, V};
  const float* f = a.factors_of(bh, c);
  const WyLayout Ly{K, V};
  const BackwardHandoff ho{K, V};
  const int ldk = Ly.ldk(), ldv = Ly.ldv(), ldt = Ly.ldt(), ldvf = Ly.ldvf(), ldkf = Ly.ldkf();
  const int rows = at.rows;
  Bf16 *kb = Ly.k(smem), *qb = Ly.q(smem), *cc = Ly.cc(smem), *T = Ly.T(smem);
  Bf16 *dvb = Ly.dv(smem), *dkb = Ly.dk(smem);
  float *dL = Ly.tile(smem, 0), *KK = Ly.tile(smem, 1), *dD = Ly.tile(smem, 2);
  float *dVb = Ly.dVb(smem), *dKb = Ly.dKb(smem);
  auto vec = [&](int i) { return Ly.vec(smem, i); };
  float *beta = vec(kBeta), *dGam = vec(kDGam), *dbeta = vec(kDBeta), *dg = vec(kDg),
        *redC = vec(kRedC);
  const std::int64_t rows0 = head_rows(a, bh, at), ld = at.qk_stride;
  float *dq = dqv + rows0, *dk = dkv + rows0;  // part 1's X and dk~ until overwritten
  const float* dP = ho.dP(ho_block);

  blk.sync();                 // the previous job is done with shared memory
  blk.threads([&](int tid) {  // T, du and dw land while the rows and the gates are made
    copy_tile(blk, tid, T, ldt, fl.Tinv(f), kC, kC, kC);
    copy_tile(blk, tid, dvb, ldv, ho.du(ho_block), V, kC, V);
    copy_tile(blk, tid, dkb, ldk, ho.dw(ho_block), K, kC, K);
    blk.commit();
  });
  const ChunkInputs in_rows = chunk_inputs(blk, a, at, vec);
  blk.threads([&](int tid) {
    for (int x = tid; x < kC * K; x += kThreads) {
      const int i = x / K, d = x % K;
      const bool in = i < rows;
      kb[i * ldk + d] = to_bf16(in ? in_rows.k(i)[d] : 0.0f);
      qb[i * ldk + d] = to_bf16(in ? in_rows.q(i)[d] : 0.0f);
    }
    if (tid < kC) {
      const bool in = tid < rows;
      vec(kG)[tid] = in ? a.in.g[at.gb + tid * at.gb_stride] : 0.0f;
      beta[tid] = in ? in_rows.beta(tid) : 0.0f;
      // dGamma = <q_i, X_i> (zero rows past the chunk's end), before dq overwrites X.
      dGam[tid] = in ? row_dot(in_rows.q(tid), dq + tid * ld, K) : 0.0f;
    }
  });
  blk.sync();
  const GateTerms gt = gate_terms(blk, vec);
  const float *Gam = gt.Gam, *e = gt.e;
  blk.sync();
  // k k^T into KK; q k^T makes dD = dP .* q k^T and dP .* D (bf16, lower).
  blk.warps([&](const auto& w, int warp, auto&) {
    using W = std::remove_cvref_t<decltype(w)>;
    const Owned o = chunk_tiles(kC, warp);
    Acc<W> acc[kMaxChunkTiles];
    warp_gemm(w, o, K, acc, Rows{kb, ldk}, Cols{kb, ldk});
    each_element(w, o, acc, [&](int i, int j, float& d) {
      KK[i * ldt + j] = mma::epilogue(1.0f, d, 0.0f, 0.0f);
    });
    Acc<W> qk[kMaxChunkTiles];
    warp_gemm(w, o, K, qk, Rows{qb, ldk}, Cols{kb, ldk});
    each_element(w, o, qk, [&](int i, int j, float& d) {
      const bool in = j <= i;
      const float p = dP[i * kC + j];
      dD[i * ldt + j] = in ? p * mma::epilogue(1.0f, d, 0.0f, 0.0f) : 0.0f;
      cc[i * ldt + j] = to_bf16(in ? p * gt.D(i, j) : 0.0f);
    });
  });
  blk.sync();
  // dq = Gamma X + (dP .* D) k; dk = (dP .* D)^T q, kept in the warps' accumulators.
  blk.warps([&](const auto& w, int warp, auto& st) {
    using W = std::remove_cvref_t<decltype(w)>;
    for (int cb = 0; cb < K; cb += 64) {
      Owned o = chunk_tiles(64, warp);
      o.j0 += cb;
      Acc<W> acc[kMaxChunkTiles];
      warp_gemm(w, o, kC, acc, Rows{cc, ldt}, Rows{kb, ldk});
      each_element(w, o, acc, [&](int i, int j, float& d) {
        if (i >= rows) return;
        float& x = dq[i * ld + j];
        x = mma::epilogue(1.0f, d, 1.0f, Gam[i] * x);
      });
    }
    const Owned o = chunk_tiles(K, warp);
    each_element(w, o, st.h, [](int, int, float& x) { x = 0.0f; });
    warp_gemm(w, o, kC, st.h, Cols{cc, ldt}, Rows{qb, ldk});
    each_element(w, o, st.h, [](int, int, float& x) { x = mma::epilogue(1.0f, x, 0.0f, 0.0f); });
  });
  // dVb = T^T du, dKb = T^T dw.
  blk.threads([&](int) { blk.wait_all(); });
  blk.sync();  // T, du and dw have landed
  blk.warps([&](const auto& w, int warp, auto&) {
    using W = std::remove_cvref_t<decltype(w)>;
    for (int cb = 0; cb < V + K; cb += 64) {
      const bool of_v = cb < V;
      Owned o = chunk_tiles(64, warp);
      o.j0 += of_v ? cb : cb - V;
      const Bf16* src = of_v ? dvb : dkb;
      const int lds = of_v ? ldv : ldk, ldo = of_v ? ldvf : ldkf;
      float* out = of_v ? dVb : dKb;
      Acc<W> acc[kMaxChunkTiles];
      warp_gemm(w, o, kC, acc, Cols{T, ldt}, Rows{src, lds});
      each_element(w, o, acc, [&](int i, int j, float& d) {
        out[i * ldo + j] = mma::epilogue(1.0f, d, 0.0f, 0.0f);
      });
    }
  });
  blk.sync();  // du and dw are read: u and w take their place
  blk.threads([&](int tid) {
    copy_tile(blk, tid, dkb, ldk, fl.w(f), K, kC, K);
    copy_tile(blk, tid, dvb, ldv, fl.u(f), V, kC, V);
    blk.commit();
    blk.wait_all();
  });
  blk.sync();
  // dL = -(dVb u^T) - (dKb w^T).
  blk.warps([&](const auto& w, int warp, auto&) {
    using W = std::remove_cvref_t<decltype(w)>;
    const Owned o = chunk_tiles(kC, warp);
    Acc<W> vu[kMaxChunkTiles], kw[kMaxChunkTiles];
    warp_gemm(w, o, V, vu, mma::FloatRows{dVb, ldvf}, Cols{dvb, ldv});
    warp_gemm(w, o, K, kw, mma::FloatRows{dKb, ldkf}, Cols{dkb, ldk});
    each_pair(w, o, kw, vu, [&](int i, int j, float& x, float y) {
      dL[i * ldt + j] = mma::epilogue(-1.0f, x, 1.0f, mma::epilogue(-1.0f, y, 0.0f, 0.0f));
    });
  });
  blk.sync();
  // ChunkKernel::backward's row loop over dL: the K K^T and D terms of dD, dbeta's first
  // part, and beta .* (dL .* D), the gradient of K K^T.
  blk.threads([&](int i) {
    if (i >= kC) return;
    float* dl = dL + i * ldt;
    const float* kk = KK + i * ldt;
    const float b = beta[i];
    for (int j = 0; j < i; ++j) {
      dD[i * ldt + j] = fused(dl[j] * b, kk[j], dD[i * ldt + j]);
      dl[j] *= gt.D(i, j);
    }
    dbeta[i] = row_dot(dl, kk, i);
    for (int j = 0; j < i; ++j) dl[j] *= b;
  });
  blk.sync();
  blk.threads([&](int tid) {  // the symmetric G + G^T, where dP .* D was
    for (int x = tid; x < kC * kC; x += kThreads) {
      const int i = x / kC, j = x % kC;
      cc[i * ldt + j] = to_bf16(j < i ? dL[i * ldt + j] : j > i ? dL[j * ldt + i] : 0.0f);
    }
  });
  blk.sync();  // dL is read: D takes its place (the row sums read it as an array)
  float* Dm = dL;
  blk.threads([&](int tid) {
    for (int x = tid; x < kC * kC; x += kThreads)
      Dm[(x / kC) * ldt + x % kC] = gt.D(x / kC, x % kC);
  });
  // dk += (G + G^T) k.
  blk.warps([&](const auto& w, int warp, auto& st) {
    using W = std::remove_cvref_t<decltype(w)>;
    const Owned o = chunk_tiles(K, warp);
    Acc<W> acc[kMaxTiles];
    warp_gemm(w, o, kC, acc, Rows{cc, ldt}, Rows{kb, ldk});
    each_pair(w, o, st.h, acc,
              [](int, int, float& x, float y) { x = mma::epilogue(1.0f, y, 1.0f, x); });
  });
  blk.sync();
  // The row terms of dbeta and dg, and the column sums of dD .* D, as ChunkKernel::backward.
  blk.threads([&](int i) {
    if (i >= kC) return;
    const bool in = i < rows;
    const InputRow ki = in_rows.k(i);
    const float rv = in ? row_dot(in_rows.v(i), dVb + i * ldvf, V) : 0.0f;
    const float rk = in ? row_dot(ki, dKb + i * ldkf, K) : 0.0f;
    const float de = in ? row_dot(ki, dk + i * ld, K) : 0.0f;
    dbeta[i] += fused(Gam[i], rk, rv);
    dGam[i] = fused(beta[i], rk, dGam[i]);
    const float rowsum = row_dot(dD + i * ldt, Dm + i * ldt, i + 1);
    dg[i] = fused(-e[i], de, fused(Gam[i], dGam[i], rowsum));
    redC[i] = e[i] * de;
    float colsum = 0.0f;
    for (int r = i; r < kC; ++r) colsum = fused(dD[r * ldt + i], Dm[r * ldt + i], colsum);
    dg[i] -= colsum;
  });
  blk.threads([&](int tid) {
    for (int x = tid; x < rows * V; x += kThreads) {
      const int i = x / V, d = x % V;
      gr.dv[at.v + i * at.v_stride + d] = beta[i] * dVb[i * ldvf + d];
    }
  });
  blk.sync();  // dk~ is read: dk takes its place
  blk.warps([&](const auto& w, int warp, auto& st) {
    each_element(w, chunk_tiles(K, warp), st.h, [&](int i, int j, float& x) {
      if (i >= rows) return;
      float& out = dk[i * ld + j];
      x += fused(beta[i] * Gam[i], dKb[i * ldkf + j], e[i] * out);
      out = x;
    });
  });
  blk.threads([&](int tid) {  // the scalar tail and the reverse running sum
    if (tid != 0) return;
    float sum_ede = 0.0f;
    for (int i = 0; i < kC; ++i) sum_ede += redC[i];
    dg[kC - 1] += fused(Gam[kC - 1], *ho.dgamma(ho_block), sum_ede);
    const float* g = vec(kG);
    for (int i = kC - 1; i >= 0; --i) {
      if (hd::is_minus_inf(g[i]))
        dg[i] = 0.0f;
      else if (i + 1 < kC && gt.seg[i + 1] == gt.seg[i])
        dg[i] += dg[i + 1];
    }
  });
  blk.sync();
  blk.threads([&](int i) {
    if (i >= rows) return;
    gr.dg[at.gb + i * at.gb_stride] = dg[i];
    gr.dbeta[at.gb + i * at.gb_stride] = dbeta[i];
  });
}

}  // namespace gdn::rwalk
