// The WY factors of every chunk in the bf16 mode, after fla's chunk_scaled_dot_kkt,
// solve_tril and recompute_w_u in one kernel: one block of eight warps per (batch * value
// head, chunk) job, with nothing in global memory but the rows and the factors (the chunk
// job's CudaExec workspace is 0.9 MB per block). In shared memory:
//  - the gates' segmented prefix sum (ChunkKernel::segmented_scan's steps and sums);
//  - k and q rounded to bf16; k k^T and q k^T in the accumulators, whose epilogues make
//    L = strict_lower(beta k k^T .* D) (fp32, shared) and P = lower(q k^T .* D) (to the
//    factors), D made on the fly from the prefix sums;
//  - T = (I + L)^{-1}: the 16 x 16 leaves by forward substitution (invert_leaves' order),
//    the merges as mma products;
//  - (beta V)^T and (beta Gamma K)^T in bf16 where k and q were, then u = T (beta V) and
//    w = T (beta Gamma K) to the factors; k~ = e k and q_g = Gamma q straight to them;
//    T too, for backward part 2.
// The factors are a Bf16Factors block: w, k~, q_g, P, u and T rounded to bf16 as they are
// stored (every reader rounds them so, and the bf16 mode rounds u), gamma in fp32.
// The same sums and epilogues as ChunkKernel::prepare on the bf16 block GEMM with a thread
// group's scan and leaves (bf16_walk.h says why that gives its bits).
#pragma once

#include <type_traits>

#include "gdn/chunk/bf16_walk.h"
#include "gdn/chunk/row_math.h"
#include "ops/l2norm/l2norm.h"

namespace gdn::rwalk {

// The per-row vectors of a chunk's gates in shared memory, kC floats each: g and beta (the
// caller's), the scan's two ping-pong pairs (sum, count), Gamma and e; and the rows'
// l2norm factors of q and k where the kernel normalises them (Bf16Io::l2norm).
enum GateVec {
  kG = 0,
  kBeta,
  kSum0,
  kCount0,
  kSum1,
  kCount1,
  kGamma,
  kE,
  kNormQ,
  kNormK,
  kGateVecs
};

constexpr int kLdMerge = 32 + 8;  // a merge's product, transposed (bf16)
constexpr std::size_t kMergeElems = std::size_t(2) * 32 * kLdMerge;
// The merges' operands rounded to bf16 once per level (L_21 and T_11, then T_22 of each
// merge: kC rows at most, kLdMerge apart), so that their mma loads are bf16 views.
constexpr std::size_t kMergeOperandElems = std::size_t(kC) * kLdMerge;

struct PrepareLayout {
  int K, V;
  GDN_HD int ldk() const { return K + 8; }   // k, q (bf16, rows)
  GDN_HD int ldt() const { return kC + 8; }  // L, T (fp32); (beta V)^T, (beta Gamma K)^T (bf16)
  GDN_HD std::size_t rows_bytes() const {    // k and q, later (beta V)^T and (beta Gamma K)^T
    const std::size_t kq = std::size_t(2) * kC * ldk(), vk = std::size_t(V + K) * ldt();
    return (kq > vk ? kq : vk) * sizeof(Bf16);
  }
  GDN_HD std::size_t bytes() const {
    return rows_bytes() + std::size_t(2) * kC * ldt() * sizeof(float) +
           (kMergeElems + kMergeOperandElems) * sizeof(Bf16) +
           std::size_t(kGateVecs) * kC * sizeof(float);
  }
  GDN_HD Bf16* k(unsigned char* s) const { return reinterpret_cast<Bf16*>(s); }
  GDN_HD Bf16* q(unsigned char* s) const { return k(s) + kC * ldk(); }
  GDN_HD Bf16* bvT(unsigned char* s) const { return k(s); }
  GDN_HD Bf16* bkT(unsigned char* s) const { return k(s) + V * ldt(); }
  GDN_HD float* L(unsigned char* s) const { return reinterpret_cast<float*>(s + rows_bytes()); }
  GDN_HD float* T(unsigned char* s) const { return L(s) + kC * ldt(); }
  GDN_HD Bf16* mT(unsigned char* s) const { return reinterpret_cast<Bf16*>(T(s) + kC * ldt()); }
  GDN_HD Bf16* mops(unsigned char* s) const { return mT(s) + kMergeElems; }
  GDN_HD float* vec(unsigned char* s, int i) const {  // GateVec i
    return reinterpret_cast<float*>(mops(s) + kMergeOperandElems) + i * kC;
  }
};

// The chunk's rows of (batch * value head) bh: where they start and how many are real.
struct RowsAt {
  std::int64_t qk, v, gb;  // offsets of row 0 in q / k, v, and g / beta
  std::int64_t qk_stride, v_stride, gb_stride;
  int rows;
};
GDN_HD inline RowsAt rows_at(const PassArgs<float>& a, int bh, std::int64_t c) {
  const int b = bh / a.Hv, hv = bh % a.Hv;
  const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
  return {(t * a.Hk + hv / a.G) * a.K,
          (t * a.Hv + hv) * a.V,
          t * a.Hv + hv,
          std::int64_t(a.Hk) * a.K,
          std::int64_t(a.Hv) * a.V,
          a.Hv,
          a.chunks[c].rows};
}

// Row i of the chunk's q or k (k a row pointer into either form of it) as the chunk math
// takes it: the fp32 input; or the bf16 one widened, times the row's l2norm factor where
// the op normalises (l2norm_row's bits on the widened row).
struct InputRow {
  const float* f;
  const Bf16* h;
  float factor;
  bool norm;
  GDN_HD float operator[](int d) const {
    if (!h) return f[d];
    const float x = to_float(h[d]);
    return norm ? x * factor : x;
  }
};

// The chunk's rows of q, k, v and beta in the form the caller keeps them (PassArgs::io or
// PassArgs::in); nq, nk: the l2norm factors (vec(kNormQ), vec(kNormK)). Pointers by value:
// a reference to the kernel's PassArgs would put them on the stack.
struct ChunkInputs {
  GdnInputView<float> in;
  Bf16Io io;
  RowsAt at;
  const float *nq, *nk;
  GDN_HD InputRow q(int i) const { return qk(io.q, in.q, nq, i); }
  GDN_HD InputRow k(int i) const { return qk(io.k, in.k, nk, i); }
  GDN_HD InputRow v(int i) const {
    const std::int64_t at_i = at.v + i * at.v_stride;
    return io.v ? InputRow{nullptr, io.v + at_i, 1.0f, false}
                : InputRow{in.v + at_i, nullptr, 1.0f, false};
  }
  GDN_HD float beta(int i) const {
    const std::int64_t at_i = at.gb + i * at.gb_stride;
    return io.beta ? to_float(io.beta[at_i]) : in.beta[at_i];
  }

 private:
  GDN_HD InputRow qk(const Bf16* h, const float* f, const float* n, int i) const {
    const std::int64_t at_i = at.qk + i * at.qk_stride;
    return h ? InputRow{nullptr, h + at_i, io.l2norm ? n[i] : 1.0f, io.l2norm}
             : InputRow{f + at_i, nullptr, 1.0f, false};
  }
};

// Where the op normalises q and k (Bf16Io::l2norm), every real row's l2norm factor into
// vec(kNormQ) and vec(kNormK), then a barrier; nothing otherwise.
template <typename Blk, typename Vec>
GDN_HD ChunkInputs chunk_inputs(Blk& blk, const PassArgs<float>& a, const RowsAt& at, Vec vec) {
  const ChunkInputs in{a.in, a.io, at, vec(kNormQ), vec(kNormK)};
  if (!a.io.l2norm) return in;
  blk.threads([&](int tid) {
    if (tid >= 2 * kC || tid % kC >= at.rows) return;
    const int i = tid % kC;
    const Bf16* row = (tid < kC ? a.io.q : a.io.k) + at.qk + i * at.qk_stride;
    vec(tid < kC ? kNormQ : kNormK)[i] =
        l2norm_factor<float>([row](int d) { return to_float(row[d]); }, a.K);
  });
  blk.sync();
  return in;
}

// One product of the inverse's merges on warps [0, n): out = alpha A B over k, A from
// a(i, p), B from b(p, j), each warp one 16 x 8 tile of the m x cols result (m, cols <= 32),
// written by put(i, j, 0 + alpha acc).
template <typename Blk, typename At, typename Bt, typename Put>
GDN_HD void merge_product(Blk& blk, int m, int cols, int k, float alpha, At a, Bt b, Put put) {
  blk.warps([&](const auto& w, int warp, auto&) {
    const int per_row = cols / 8;
    if (warp >= (m / 16) * per_row) return;
    const Owned o{16 * (warp / per_row), 8 * (warp % per_row), 1};
    Acc<std::remove_cvref_t<decltype(w)>> acc[1];
    warp_gemm(w, o, k, acc, a, b);
    each_element(w, o, acc,
                 [&](int i, int j, float& d) { put(i, j, mma::epilogue(alpha, d, 0.0f, 0.0f)); });
  });
}

// What gate_terms leaves: G = the running sum of g since the last -inf row, seg = the count
// of -inf rows so far, Gamma = exp(G) before the first of them (0 after), e = exp(G_C - G)
// in the last segment (0 before it); and D(i, j) = exp(G_i - G_j) within a segment, j <= i.
struct GateTerms {
  const float *G, *seg, *Gam, *e;
  GDN_HD float D(int i, int j) const {
    return j <= i && seg[i] == seg[j] ? decay_exp(G[i] - G[j]) : 0.0f;
  }
};

// ChunkKernel::segmented_scan and decay_terms' Gamma and e, element i on thread i, from g
// in vec(kG) (written and synchronised by the caller). Ends without a barrier: e is
// visible after the caller's next one.
template <typename Blk, typename Vec>
GDN_HD GateTerms gate_terms(Blk& blk, Vec vec) {
  const float* g = vec(kG);
  blk.threads([&](int tid) {
    if (tid >= kC) return;
    const bool reset = hd::is_minus_inf(g[tid]);
    vec(kSum0)[tid] = reset ? 0.0f : g[tid];
    vec(kCount0)[tid] = reset ? 1.0f : 0.0f;
  });
  int cur = 0;
  for (int off = 1; off < kC; off *= 2, cur = 1 - cur) {
    blk.sync();
    const float *sum = vec(kSum0 + 2 * cur), *count = vec(kCount0 + 2 * cur);
    float *next_sum = vec(kSum0 + 2 * (1 - cur)), *next_count = vec(kCount0 + 2 * (1 - cur));
    blk.threads([&](int i) {
      if (i >= kC) return;
      const bool joined = i >= off;
      next_sum[i] = joined && count[i] == 0.0f ? sum[i - off] + sum[i] : sum[i];
      next_count[i] = joined ? count[i - off] + count[i] : count[i];
    });
  }
  blk.sync();
  const float *G = vec(kSum0 + 2 * cur), *seg = vec(kCount0 + 2 * cur);
  float *Gam = vec(kGamma), *e = vec(kE);
  blk.threads([&](int i) {
    if (i < kC) Gam[i] = seg[i] == 0.0f ? hd::exp(G[i]) : 0.0f;
  });
  blk.sync();
  blk.threads([&](int i) {
    if (i < kC) e[i] = seg[i] == seg[kC - 1] ? hd::exp(G[kC - 1] - G[i]) : 0.0f;
  });
  return {G, seg, Gam, e};
}

// T = (I + L)^{-1} (fp32, leading dimension ldt; L strictly lower, T zero, both visible):
// the 16 x 16 leaves by forward substitution, row i of all four at once (invert_leaves),
// then the merges of blocks of 16 and 32 as mma products, T_21 = -T_22 (L_21 T_11), with
// mT (kMergeElems bf16) holding each product transposed and ops (kMergeOperandElems bf16)
// each level's L_21, T_11 and then T_22 rounded once, all read by whole 8 x 8 matrices
// (their leading dimension is a constant). Ends with a barrier.
template <typename Blk>
GDN_HD void unit_lower_inverse(Blk& blk, const float* L, float* T, int ldt, Bf16* mT, Bf16* ops) {
  for (int i = 0; i < 16; ++i) {
    blk.threads([&](int tid) {
      for (int x = tid; x < 4 * (i + 1); x += kThreads) {
        const int b = (x / (i + 1)) * 16, col = x % (i + 1);
        float* Ti = T + (b + i) * ldt + b;
        if (col == i) {
          Ti[i] = 1.0f;
          continue;
        }
        float acc = 0.0f;
        for (int j = col; j < i; ++j)
          acc = hd::add_rn(acc, -hd::mul_rn(L[(b + i) * ldt + b + j], T[(b + j) * ldt + b + col]));
        Ti[col] = acc;
      }
    });
    blk.sync();
  }
  constexpr int ld = kLdMerge;
  for (int s = 16; s < kC; s *= 2) {
    const int merges = kC / (2 * s);
    // Merge q's L_21 at rows 2 s q of ops, its T_11 at rows 2 s q + s (s x s each).
    blk.threads([&](int tid) {
      for (int x = tid; x < merges * 2 * s * s; x += kThreads) {
        const int q = x / (2 * s * s), y = x % (2 * s * s), t11 = y / (s * s), i = (y / s) % s,
                  j = y % s, b = 2 * s * q;
        const float v = t11 ? T[(b + i) * ldt + b + j] : L[(b + s + i) * ldt + b + j];
        ops[(2 * s * q + s * t11 + i) * ld + j] = to_bf16(v);
      }
    });
    blk.sync();
    for (int q = 0; q < merges; ++q) {
      Bf16* m = mT + q * 32 * kLdMerge;
      const Bf16* l21 = ops + 2 * s * q * ld;
      merge_product(blk, s, s, s, 1.0f, mma::MatrixRows{{l21, ld}},
                    mma::MatrixRows{{l21 + s * ld, ld}},
                    [&](int i, int j, float v) { m[j * kLdMerge + i] = to_bf16(v); });
    }
    blk.sync();
    // Merge q's T_22 at rows s q of ops.
    blk.threads([&](int tid) {
      for (int x = tid; x < merges * s * s; x += kThreads) {
        const int q = x / (s * s), i = (x / s) % s, j = x % s, lo = 2 * s * q + s;
        ops[(s * q + i) * ld + j] = to_bf16(T[(lo + i) * ldt + lo + j]);
      }
    });
    blk.sync();
    for (int q = 0; q < merges; ++q) {
      const int b = 2 * s * q, lo = b + s;
      const Bf16* m = mT + q * 32 * kLdMerge;
      merge_product(blk, s, s, s, -1.0f, mma::MatrixRows{{ops + s * q * ld, ld}},
                    mma::MatrixCols{{m, kLdMerge}},
                    [&](int i, int j, float v) { T[(lo + i) * ldt + b + j] = v; });
    }
    blk.sync();
  }
}

// One job: the factors of chunk c of bh into a.factors (a Bf16Factors block).
template <typename Blk>
GDN_HD void prepare(Blk& blk, const PassArgs<float>& a, std::int64_t job, unsigned char* smem) {
  const int K = a.K, V = a.V, bh = int(job / a.num_chunks);
  const std::int64_t c = job % a.num_chunks;
  const PrepareLayout Ly{K, V};
  const RowsAt at = rows_at(a, bh, c);
  const Bf16Factors fl{kC, K, V};
  float* f = a.factors_of(bh, c);
  const int ldk = Ly.ldk(), ldt = Ly.ldt();
  Bf16 *kb = Ly.k(smem), *qb = Ly.q(smem);
  float *L = Ly.L(smem), *T = Ly.T(smem), *g = Ly.vec(smem, kG), *beta = Ly.vec(smem, kBeta);

  blk.sync();  // the previous job is done with shared memory
  const ChunkInputs rows = chunk_inputs(blk, a, at, [&](int i) { return Ly.vec(smem, i); });
  blk.threads([&](int tid) {
    for (int x = tid; x < kC * K; x += kThreads) {
      const int i = x / K, d = x % K;
      const bool in = i < at.rows;
      kb[i * ldk + d] = to_bf16(in ? rows.k(i)[d] : 0.0f);
      qb[i * ldk + d] = to_bf16(in ? rows.q(i)[d] : 0.0f);
    }
    for (int x = tid; x < kC * kC; x += kThreads) T[(x / kC) * ldt + x % kC] = 0.0f;
    if (tid < kC) {
      const bool in = tid < at.rows;
      g[tid] = in ? a.in.g[at.gb + tid * at.gb_stride] : 0.0f;
      beta[tid] = in ? rows.beta(tid) : 0.0f;
    }
  });
  blk.sync();
  const GateTerms gt = gate_terms(blk, [&](int i) { return Ly.vec(smem, i); });
  const float *Gam = gt.Gam, *e = gt.e;
  blk.threads([&](int i) {
    if (i == 0) *fl.gamma_at(f) = Gam[kC - 1];
  });
  auto D = [&](int i, int j) { return gt.D(i, j); };
  // k k^T and q k^T (k-major B: k's rows), then L and P.
  Bf16* P = fl.P(f);
  blk.warps([&](const auto& w, int warp, auto&) {
    const Owned o = chunk_tiles(kC, warp);
    auto k_row = Cols{kb, ldk};
    Acc<std::remove_cvref_t<decltype(w)>> acc[kMaxChunkTiles];
    warp_gemm(w, o, K, acc, Rows{kb, ldk}, k_row);
    each_element(w, o, acc, [&](int i, int j, float& d) {
      const float kk = mma::epilogue(1.0f, d, 0.0f, 0.0f);
      L[i * ldt + j] = j < i ? beta[i] * kk * D(i, j) : 0.0f;
    });
    Acc<std::remove_cvref_t<decltype(w)>> qk[kMaxChunkTiles];
    warp_gemm(w, o, K, qk, Rows{qb, ldk}, k_row);
    each_element(w, o, qk, [&](int i, int j, float& d) {
      P[i * kC + j] = to_bf16(j <= i ? mma::epilogue(1.0f, d, 0.0f, 0.0f) * D(i, j) : 0.0f);
    });
  });
  blk.sync();  // k and q are read: their space takes (beta V)^T and (beta Gamma K)^T
  Bf16 *bvT = Ly.bvT(smem), *bkT = Ly.bkT(smem);
  Bf16 *kt = fl.kt(f), *qg = fl.qg(f);
  blk.threads([&](int tid) {
    for (int x = tid; x < kC * V; x += kThreads) {
      const int i = x / V, d = x % V;
      const float v = i < at.rows ? rows.v(i)[d] : 0.0f;
      bvT[d * ldt + i] = to_bf16(beta[i] * v);
    }
    for (int x = tid; x < kC * K; x += kThreads) {
      const int i = x / K, d = x % K;
      const bool in = i < at.rows;
      const float kv = in ? rows.k(i)[d] : 0.0f;
      const float qv = in ? rows.q(i)[d] : 0.0f;
      bkT[d * ldt + i] = to_bf16(beta[i] * Gam[i] * kv);
      kt[i * K + d] = to_bf16(e[i] * kv);
      qg[i * K + d] = to_bf16(Gam[i] * qv);
    }
  });
  unit_lower_inverse(blk, L, T, ldt, Ly.mT(smem),
                     Ly.mops(smem));  // L visible since the last barrier
  // T to the factors (backward part 2 reads it), u = T (beta V), w = T (beta Gamma K),
  // 64 columns at a time.
  Bf16 *u = fl.u(f), *wf = fl.w(f), *Tf = fl.Tinv(f);
  blk.threads([&](int tid) {
    for (int x = tid; x < kC * kC; x += kThreads) Tf[x] = to_bf16(T[(x / kC) * ldt + x % kC]);
  });
  blk.warps([&](const auto& w, int warp, auto&) {
    auto t_at = mma::FloatRows{T, ldt};
    for (int cb = 0; cb < V + K; cb += 64) {
      const bool of_u = cb < V;
      const int c0 = of_u ? cb : cb - V;
      const Bf16* src = of_u ? bvT : bkT;
      Owned o = chunk_tiles(64, warp);
      o.j0 += c0;
      Acc<std::remove_cvref_t<decltype(w)>> acc[kMaxChunkTiles];
      warp_gemm(w, o, kC, acc, t_at, Cols{src, ldt});
      each_element(w, o, acc, [&](int i, int j, float& d) {
        const float x = mma::epilogue(1.0f, d, 0.0f, 0.0f);
        (of_u ? u[i * V + j] : wf[i * K + j]) = to_bf16(x);
      });
    }
  });
}

}  // namespace gdn::rwalk
