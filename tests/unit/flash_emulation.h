// The flash attention kernels of ops/attention/flash_attention_cuda.cu run on the CPU: the
// same blocks, tiles, barriers' order and per-lane code (ops/attention/flash_order.h), the
// 4 warps of a block one after another and each warp's mma emulated from the PTX fragment
// tables (mma_emulation.h); the quad shuffles are the same butterflies over the lanes'
// values. What is not shared with the kernels is their loop nest, transcribed here.
#pragma once

#include <cstdint>
#include <vector>

#include "mma_emulation.h"
#include "ops/attention/flash_order.h"

namespace gdn::test {

struct FlashProblem {
  int B;
  std::vector<std::int64_t> qpos, kstart;  // kstart empty: no documents
  std::int64_t Tk;
  int Hq, Hkv, D;
  double scale;
  std::int64_t Tq() const { return std::int64_t(qpos.size()); }
  const std::int64_t* ks() const { return kstart.empty() ? nullptr : kstart.data(); }
};

namespace flash_emu {

namespace fl = gdn::flash;
using i64 = std::int64_t;
struct Frags {  // one fragment of every lane of a warp
  mma::FragC f[32];
};

inline i64 at(i64 b, i64 t, i64 T, int h, int H, int D) {
  return ((b * T + t) * H + h) * D;
}

// The shuffles: the four lanes of a row combine as __shfl_xor 1 then 2 does.
template <typename F>
void quad(float (&x)[32], F op) {
  for (int m : {1, 2}) {
    float y[32];
    for (int lane = 0; lane < 32; ++lane) y[lane] = op(x[lane], x[lane ^ m]);
    for (int lane = 0; lane < 32; ++lane) x[lane] = y[lane];
  }
}

// The lanes' A (B) fragments of one warp, by frag_a (frag_b).
inline void load_a(mma::FragA (&a)[32], const Bf16* base, int ld) {
  for (int lane = 0; lane < 32; ++lane) a[lane] = fl::frag_a(lane, base, ld);
}
inline void load_b(mma::FragB (&b)[32], const Bf16* base, int ld) {
  for (int lane = 0; lane < 32; ++lane) b[lane] = fl::frag_b(lane, base, ld);
}
// d += op, op's A and B fragments from shared tiles.
inline void mma_tiles(Frags& d, const Bf16* a, int lda, const Bf16* b, int ldb) {
  mma::FragA fa[32];
  mma::FragB fb[32];
  load_a(fa, a, lda);
  load_b(fb, b, ldb);
  emulate_mma(d.f, fa, fb);
}
// The kernels' slice_products: s[c] += A X_c^T and, with two, t[c] += A2 Y_c^T over the Dp
// columns, A and A2 the warp's 16 rows at a, a2, X_c and Y_c rows kk 16 + 8c of x and y.
template <int Dp>
void slice_products(int kk, const Bf16* a, const Bf16* x, const Bf16* a2, const Bf16* y, bool two,
                    Frags (&s)[2], Frags (&t)[2]) {
  using L = fl::Layout<Dp>;
  for (int ks = 0; ks < Dp; ks += 16)
    for (int c = 0; c < 2; ++c) {
      const int row = (kk * 16 + c * 8) * L::kLdRow + ks;
      mma_tiles(s[c], a + ks, L::kLdRow, x + row, L::kLdRow);
      if (two) mma_tiles(t[c], a2 + ks, L::kLdRow, y + row, L::kLdRow);
    }
}
// d += P V-style: A from two score fragments by c_pair_to_a, B from a row tile read across
// its rows (frag_b_rows).
inline void mma_pair(Frags& d, const Frags& left, const Frags& right, const Bf16* b, int ldb) {
  mma::FragA fa[32];
  mma::FragB fb[32];
  for (int lane = 0; lane < 32; ++lane) {
    fa[lane] = mma::c_pair_to_a(left.f[lane], right.f[lane]);
    fb[lane] = fl::frag_b_rows(lane, b, ldb);
  }
  emulate_mma(d.f, fa, fb);
}

// Lane's copy of fragments [0, N) of a warp (stored [N][32]) and back.
template <int N>
void gather(mma::FragC (&out)[N], const Frags* f, int lane) {
  for (int n = 0; n < N; ++n) out[n] = f[n].f[lane];
}
template <int N>
void scatter(Frags* f, const mma::FragC (&in)[N], int lane) {
  for (int n = 0; n < N; ++n) f[n].f[lane] = in[n];
}

template <int Dp>
void forward(const FlashProblem& p, const float* q, const float* k, const float* v, float* o,
             float* lse) {
  using L = fl::Layout<Dp>;
  constexpr int N = Dp / 8;
  const i64 Tq = p.Tq(), Tk = p.Tk, tiles = (Tq + fl::kTile - 1) / fl::kTile;
  const int D = p.D, G = p.Hq / p.Hkv;
  const float scale2 = float(p.scale * double(fl::kLog2e));
  std::vector<Bf16> Qs(L::kRowElems), Ks(L::kRowElems), Vs(L::kRowElems);
  std::vector<Frags> acc(std::size_t(fl::kWarps) * N);
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.Hq; ++h)
      for (i64 tile = 0; tile < tiles; ++tile) {
        const int kh = h / G;
        const i64 i0 = tile * fl::kTile;
        const int nr = int(std::min<i64>(fl::kTile, Tq - i0));
        for (int tid = 0; tid < fl::kThreads; ++tid)
          fl::stage_rows<Dp>(tid, q + at(b, i0, Tq, h, p.Hq, D), i64(p.Hq) * D, nr, D, Qs.data());
        const fl::Window win = fl::tile_window(p.qpos.data(), p.ks(), b, Tq, i0);
        fl::Window w[fl::kWarps][32][2];
        float m[fl::kWarps][32][2], l[fl::kWarps][32][2];
        for (int warp = 0; warp < fl::kWarps; ++warp)
          for (int lane = 0; lane < 32; ++lane)
            for (int e = 0; e < 2; ++e) {
              const i64 i = i0 + warp * 16 + mma::c_row(lane, 0) + 8 * e;
              w[warp][lane][e] = fl::query_window(p.qpos.data(), p.ks(), b, Tq, i);
              m[warp][lane][e] = fl::kNoMax;
              l[warp][lane][e] = 0.0f;
            }
        for (auto& f : acc)
          for (auto& x : f.f) x = mma::FragC{};
        for (i64 j0 = fl::first_key_tile(win); j0 <= win.hi; j0 += fl::kTile) {
          bool any = false;  // __syncthreads_or
          for (int warp = 0; warp < fl::kWarps; ++warp)
            for (int lane = 0; lane < 32; ++lane)
              any = any || fl::meets(w[warp][lane][0], j0) || fl::meets(w[warp][lane][1], j0);
          if (!any) continue;
          const int nk = int(std::min<i64>(fl::kTile, Tk - j0));
          for (int tid = 0; tid < fl::kThreads; ++tid) {
            fl::stage_rows<Dp>(tid, k + at(b, j0, Tk, kh, p.Hkv, D), i64(p.Hkv) * D, nk, D,
                               Ks.data());
            fl::stage_rows<Dp>(tid, v + at(b, j0, Tk, kh, p.Hkv, D), i64(p.Hkv) * D, nk, D,
                               Vs.data());
          }
          for (int warp = 0; warp < fl::kWarps; ++warp) {
            Frags s[fl::kTile / 8] = {};
            for (int ks = 0; ks < Dp; ks += 16)
              for (int c = 0; c < fl::kTile / 8; ++c)
                mma_tiles(s[c], Qs.data() + warp * 16 * L::kLdRow + ks, L::kLdRow,
                          Ks.data() + c * 8 * L::kLdRow + ks, L::kLdRow);
            float mx[2][32];
            for (int lane = 0; lane < 32; ++lane) {
              mma::FragC sl[fl::kTile / 8];
              gather(sl, s, lane);
              fl::scale_mask(lane, sl, scale2, j0, w[warp][lane]);
              float lm[2];
              fl::lane_row_max(sl, lm);
              mx[0][lane] = lm[0];
              mx[1][lane] = lm[1];
              scatter(s, sl, lane);
            }
            for (int e = 0; e < 2; ++e) quad(mx[e], fl::max2);
            for (int lane = 0; lane < 32; ++lane) {
              float mu[2], alpha[2];
              for (int e = 0; e < 2; ++e)
                alpha[e] = fl::online_step(m[warp][lane][e], l[warp][lane][e], mx[e][lane], mu[e]);
              mma::FragC al[N], sl[fl::kTile / 8];
              gather(al, &acc[std::size_t(warp) * N], lane);
              fl::rescale(al, alpha);
              scatter(&acc[std::size_t(warp) * N], al, lane);
              gather(sl, s, lane);
              fl::exponentiate(sl, mu, l[warp][lane]);
              scatter(s, sl, lane);
            }
            for (int kk = 0; kk < fl::kSlices; ++kk)
              for (int n = 0; n < N; ++n)
                mma_pair(acc[std::size_t(warp) * N + n], s[2 * kk], s[2 * kk + 1],
                         Vs.data() + kk * 16 * L::kLdRow + n * 8, L::kLdRow);
          }
        }
        for (int warp = 0; warp < fl::kWarps; ++warp) {
          float ls[2][32];
          for (int lane = 0; lane < 32; ++lane)
            for (int e = 0; e < 2; ++e) ls[e][lane] = l[warp][lane][e];
          for (int e = 0; e < 2; ++e) quad(ls[e], [](float a, float c) { return a + c; });
          for (int lane = 0; lane < 32; ++lane) {
            for (int n = 0; n < N; ++n)
              for (int e = 0; e < 4; ++e) {
                const int r = warp * 16 + mma::c_row(lane, e), d = n * 8 + mma::c_col(lane, e);
                if (r < nr && d < D)
                  o[at(b, i0 + r, Tq, h, p.Hq, D) + d] =
                      acc[std::size_t(warp) * N + n].f[lane].c[e] *
                      fl::inverse_sum(ls[e / 2][lane]);
              }
            const int r0 = warp * 16 + mma::c_row(lane, 0);
            if (lane % 4 == 0)
              for (int e = 0; e < 2; ++e)
                if (r0 + 8 * e < nr)
                  lse[(b * Tq + i0 + r0 + 8 * e) * p.Hq + h] =
                      fl::natural_lse(m[warp][lane][e], ls[e][lane]);
          }
        }
      }
}

// The backward's three kernels: delta, dQ by query tile, dK and dV by key tile.
template <int Dp>
void backward(const FlashProblem& p, const float* q, const float* k, const float* v, const float* o,
              const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  using L = fl::Layout<Dp>;
  constexpr int N = Dp / 8;
  const i64 Tq = p.Tq(), Tk = p.Tk, tiles = (Tq + fl::kTile - 1) / fl::kTile;
  const int D = p.D, G = p.Hq / p.Hkv;
  const float scale = float(p.scale), scale2 = float(p.scale * double(fl::kLog2e));
  std::vector<float> delta(std::size_t(p.B * Tq * p.Hq));
  for (std::size_t r = 0; r < delta.size(); ++r) {
    float s[32] = {};  // lane-strided partial sums, then the warp's butterfly
    for (int d = 0; d < D; ++d) s[d % 32] += dout[r * D + d] * o[r * D + d];
    for (int m = 16; m > 0; m >>= 1) {
      float t[32];
      for (int lane = 0; lane < 32; ++lane) t[lane] = s[lane] + s[lane ^ m];
      std::copy(t, t + 32, s);
    }
    delta[r] = s[0];
  }
  std::vector<Bf16> Qs(L::kRowElems), Gs(L::kRowElems), Ks(L::kRowElems), Vs(L::kRowElems);
  std::vector<Frags> acc(std::size_t(fl::kWarps) * N);
  auto clear = [&] {
    for (auto& f : acc)
      for (auto& x : f.f) x = mma::FragC{};
  };
  const i64 qstride = i64(p.Hq) * D, kstride = i64(p.Hkv) * D;
  // dQ.
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.Hq; ++h)
      for (i64 tile = 0; tile < tiles; ++tile) {
        const int kh = h / G;
        const i64 i0 = tile * fl::kTile;
        const int nr = int(std::min<i64>(fl::kTile, Tq - i0));
        for (int tid = 0; tid < fl::kThreads; ++tid) {
          fl::stage_rows<Dp>(tid, q + at(b, i0, Tq, h, p.Hq, D), qstride, nr, D, Qs.data());
          fl::stage_rows<Dp>(tid, dout + at(b, i0, Tq, h, p.Hq, D), qstride, nr, D, Gs.data());
        }
        const fl::Window win = fl::tile_window(p.qpos.data(), p.ks(), b, Tq, i0);
        fl::Window w[fl::kWarps][32][2];
        float lse2[fl::kWarps][32][2], dl[fl::kWarps][32][2];
        for (int warp = 0; warp < fl::kWarps; ++warp)
          for (int lane = 0; lane < 32; ++lane)
            for (int e = 0; e < 2; ++e) {
              const i64 i = i0 + warp * 16 + mma::c_row(lane, 0) + 8 * e,
                        row = (b * Tq + i) * p.Hq + h;
              w[warp][lane][e] = fl::query_window(p.qpos.data(), p.ks(), b, Tq, i);
              lse2[warp][lane][e] = i < Tq ? lse[row] * fl::kLog2e : 0.0f;
              dl[warp][lane][e] = i < Tq ? delta[std::size_t(row)] : 0.0f;
            }
        clear();
        for (i64 j0 = fl::first_key_tile(win); j0 <= win.hi; j0 += fl::kTile) {
          bool any = false;
          for (int warp = 0; warp < fl::kWarps; ++warp)
            for (int lane = 0; lane < 32; ++lane)
              any = any || fl::meets(w[warp][lane][0], j0) || fl::meets(w[warp][lane][1], j0);
          if (!any) continue;
          const int nk = int(std::min<i64>(fl::kTile, Tk - j0));
          const i64 kv = at(b, j0, Tk, kh, p.Hkv, D);
          for (int tid = 0; tid < fl::kThreads; ++tid) {
            fl::stage_rows<Dp>(tid, k + kv, kstride, nk, D, Ks.data());
            fl::stage_rows<Dp>(tid, v + kv, kstride, nk, D, Vs.data());
          }
          for (int warp = 0; warp < fl::kWarps; ++warp)
            for (int kk = 0; kk < fl::kSlices; ++kk) {
              Frags s[2] = {}, dp[2] = {};
              slice_products<Dp>(kk, Qs.data() + warp * 16 * L::kLdRow, Ks.data(),
                                 Gs.data() + warp * 16 * L::kLdRow, Vs.data(), true, s, dp);
              for (int lane = 0; lane < 32; ++lane) {
                mma::FragC sl[2], dpl[2];
                gather(sl, s, lane);
                gather(dpl, dp, lane);
                fl::query_major_grads(lane, sl, dpl, scale2, j0 + kk * 16, w[warp][lane],
                                      lse2[warp][lane], dl[warp][lane]);
                scatter(s, sl, lane);
              }
              for (int n = 0; n < N; ++n)
                mma_pair(acc[std::size_t(warp) * N + n], s[0], s[1],
                         Ks.data() + kk * 16 * L::kLdRow + n * 8, L::kLdRow);
            }
        }
        for (int warp = 0; warp < fl::kWarps; ++warp)
          for (int lane = 0; lane < 32; ++lane)
            for (int n = 0; n < N; ++n)
              for (int e = 0; e < 4; ++e) {
                const int r = warp * 16 + mma::c_row(lane, e), d = n * 8 + mma::c_col(lane, e);
                if (r < nr && d < D)
                  dq[at(b, i0 + r, Tq, h, p.Hq, D) + d] =
                      scale * acc[std::size_t(warp) * N + n].f[lane].c[e];
              }
      }
  // dK (kDk) and dV.
  for (bool kDk : {true, false}) {
    float* out = kDk ? dk : dv;
    for (int b = 0; b < p.B; ++b)
      for (int kh = 0; kh < p.Hkv; ++kh)
        for (i64 j0 = 0; j0 < Tk; j0 += fl::kTile) {
          const int nk = int(std::min<i64>(fl::kTile, Tk - j0));
          const i64 kv = at(b, j0, Tk, kh, p.Hkv, D);
          for (int tid = 0; tid < fl::kThreads; ++tid) {
            fl::stage_rows<Dp>(tid, k + kv, kstride, nk, D, Ks.data());
            if (kDk) fl::stage_rows<Dp>(tid, v + kv, kstride, nk, D, Vs.data());
          }
          clear();
          fl::Window win_s[fl::kTile];
          float lse2_s[fl::kTile], delta_s[fl::kTile];
          for (int h = kh * G; h < (kh + 1) * G; ++h)
            for (i64 tile = 0; tile < tiles; ++tile) {
              if (!fl::meets(fl::tile_window(p.qpos.data(), p.ks(), b, Tq, tile * fl::kTile), j0))
                continue;
              const i64 i0 = tile * fl::kTile;
              const int nr = int(std::min<i64>(fl::kTile, Tq - i0));
              for (int t = 0; t < fl::kTile; ++t) {
                const i64 i = i0 + t, row = (b * Tq + i) * p.Hq + h;
                win_s[t] = fl::query_window(p.qpos.data(), p.ks(), b, Tq, i);
                lse2_s[t] = i < Tq ? lse[row] * fl::kLog2e : 0.0f;
                delta_s[t] = i < Tq && kDk ? delta[std::size_t(row)] : 0.0f;
              }
              const i64 qo = at(b, i0, Tq, h, p.Hq, D);
              for (int tid = 0; tid < fl::kThreads; ++tid) {
                fl::stage_rows<Dp>(tid, q + qo, qstride, nr, D, Qs.data());
                fl::stage_rows<Dp>(tid, dout + qo, qstride, nr, D, Gs.data());
              }
              for (int warp = 0; warp < fl::kWarps; ++warp)
                for (int kk = 0; kk < fl::kSlices; ++kk) {
                  Frags s[2] = {}, dp[2] = {};
                  slice_products<Dp>(kk, Ks.data() + warp * 16 * L::kLdRow, Qs.data(),
                                     Vs.data() + warp * 16 * L::kLdRow, Gs.data(), kDk, s, dp);
                  for (int lane = 0; lane < 32; ++lane) {
                    const i64 r0 = j0 + warp * 16 + mma::c_row(lane, 0);
                    const i64 j[2] = {r0, r0 + 8};
                    mma::FragC sl[2], dpl[2];
                    gather(sl, s, lane);
                    gather(dpl, dp, lane);
                    fl::key_major_probs(lane, sl, scale2, j, win_s, lse2_s, kk * 16);
                    if (kDk) fl::key_major_grads(lane, sl, dpl, delta_s, kk * 16);
                    scatter(s, sl, lane);
                  }
                  for (int n = 0; n < N; ++n)
                    mma_pair(acc[std::size_t(warp) * N + n], s[0], s[1],
                             (kDk ? Qs : Gs).data() + kk * 16 * L::kLdRow + n * 8, L::kLdRow);
                }
            }
          const float f = kDk ? scale : 1.0f;
          for (int warp = 0; warp < fl::kWarps; ++warp)
            for (int lane = 0; lane < 32; ++lane)
              for (int n = 0; n < N; ++n)
                for (int e = 0; e < 4; ++e) {
                  const int r = warp * 16 + mma::c_row(lane, e), d = n * 8 + mma::c_col(lane, e);
                  if (r < nk && d < D)
                    out[at(b, j0 + r, Tk, kh, p.Hkv, D) + d] =
                        f * acc[std::size_t(warp) * N + n].f[lane].c[e];
                }
        }
  }
}

}  // namespace flash_emu

// The emulated kernels at p's padded head dim.
inline void emulated_flash_forward(const FlashProblem& p, const float* q, const float* k,
                                   const float* v, float* o, float* lse) {
  switch (flash::padded_dim(p.D)) {
    case 64:
      return flash_emu::forward<64>(p, q, k, v, o, lse);
    case 128:
      return flash_emu::forward<128>(p, q, k, v, o, lse);
    default:
      return flash_emu::forward<256>(p, q, k, v, o, lse);
  }
}
inline void emulated_flash_backward(const FlashProblem& p, const float* q, const float* k,
                                    const float* v, const float* o, const float* lse,
                                    const float* dout, float* dq, float* dk, float* dv) {
  switch (flash::padded_dim(p.D)) {
    case 64:
      return flash_emu::backward<64>(p, q, k, v, o, lse, dout, dq, dk, dv);
    case 128:
      return flash_emu::backward<128>(p, q, k, v, o, lse, dout, dq, dk, dv);
    default:
      return flash_emu::backward<256>(p, q, k, v, o, lse, dout, dq, dk, dv);
  }
}

}  // namespace gdn::test
