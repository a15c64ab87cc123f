// Flash attention on bf16 tensor cores (mma.sync m16n8k16, fp32 accumulation), in the
// order of flash_order.h. A block is 4 warps; a warp owns 16 rows of a 64-row tile.
//  - Forward: a block per (64 query rows, b, h); Q staged once, K and V a 64-key tile at a
//    time (bf16 inputs by cp.async into two stages, the next tile landing while the warps
//    work); S = Q K^T in registers, the online softmax per tile, P turned into A
//    fragments in registers (c_pair_to_a) for O += P V. Key tiles outside every row's
//    window are skipped (the tile's window union, then a block vote per tile).
//  - Backward, FA2's formulas from the saved lse, as three kernels so that every output
//    has one owner and a fixed order of sums (no atomics, as every CUDA op here): delta =
//    rowsum(dO * O); dQ by query tile over key tiles; dK and dV each by key tile over the
//    query heads of its group, then the query tiles. Three kernels recompute S (and dP)
//    where one fused kernel would not, but each keeps one 16 x D accumulator per warp:
//    at D = 256 two would not fit in registers.
// Every tile lies in shared memory as it lies in the tensor (tokens by head dim); a B
// operand whose k runs over tokens (V in P V, K in dS K, Q or dO in the dK, dV sums) is
// read across the rows by ldmatrix .trans (flash_order.h's frag_b_rows). Head dims are
// padded to 64, 128 or 256 (template Dp); shared memory is up to 165 KiB (D = 256, the
// forward on bf16 inputs), opted into per kernel.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "ops/attention/attention.h"
#include "ops/attention/flash_attention.h"
#include "ops/attention/flash_order.h"
#include "ops/cuda_util.cuh"
#include "ops/mma/mma_bf16.cuh"

namespace gdn::ops {

namespace {

namespace fl = gdn::flash;
using i64 = std::int64_t;
using fl::FragA;
using fl::FragB;
using fl::FragC;
using fl::kThreads;
using fl::kTile;
using fl::Window;

// The four lanes holding one row's elements (lane / 4 equal) combine their shares.
__device__ inline float quad_max(float x) {
  x = fl::max2(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fl::max2(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Offset of row (b, t, h) of a [B, T, H, D] tensor.
__device__ inline i64 at(i64 b, i64 t, i64 T, int h, int H, int D) {
  return ((b * T + t) * H + h) * D;
}

// The window union of every (b, query tile).
__global__ void tile_window_kernel(const i64* qpos, const i64* kstart, int B, i64 Tq, i64 tiles,
                                   Window* out) {
  for (i64 u = cuda_util::thread_index(); u < B * tiles; u += cuda_util::thread_stride())
    out[u] = fl::tile_window(qpos, kstart, u / tiles, Tq, u % tiles * kTile);
}

// delta[r] = dout_r . o_r in fp32, one warp per row (lane-strided, then a butterfly).
__global__ void flash_delta_kernel(const float* dout, const float* o, i64 rows, int D,
                                   float* delta) {
  using cuda_util::kWarp, cuda_util::thread_index, cuda_util::thread_stride;
  GDN_FOR_EACH_WARP_ROW(r, lane, rows) {
    const float s = cuda_util::warp_row_dot<float>(dout + r * D, o + r * D, D, lane);
    if (lane == 0) delta[r] = s;
  }
}

// The lane's two rows of the warp's 16: the tile rows r0 and r0 + 8.
__device__ inline int lane_row(int warp, int lane) {
  return warp * 16 + mma::c_row(lane, 0);
}

// The query tile a forward or dQ block works on: blockIdx.x the tile, blockIdx.y = b Hq + h;
// nr its rows (fewer in the last tile), r0 this lane's first row in the tile.
struct QueryTile {
  i64 tiles, tile, i0, b;
  int h, kh, nr, r0;
  __device__ QueryTile(i64 Tq, int Hq, int Hkv, int warp, int lane)
      : tiles((Tq + kTile - 1) / kTile),
        tile(blockIdx.x),
        i0(tile * kTile),
        b(blockIdx.y / Hq),
        h(int(blockIdx.y % Hq)),
        kh(h / (Hq / Hkv)),
        nr(int(Tq - i0 < kTile ? Tq - i0 : kTile)),
        r0(lane_row(warp, lane)) {}
};

// Thread tid's share of staging rows [0, n) of a key tile of bf16 K or V (D columns, a
// multiple of 8, at 16-byte-aligned rows) by 16-byte cp.async, and zeros into rows
// [n, kTile) (plain stores; columns [D, Dp) the caller zeroed once).
template <int Dp>
__device__ void copy_rows_async(int tid, const Bf16* src, i64 stride, int n, int D, Bf16* dst) {
  using L = fl::Layout<Dp>;
  const int pieces = D / 8;
  for (int x = tid; x < kTile * pieces; x += kThreads) {
    const int r = x / pieces, c = 8 * (x % pieces);
    Bf16* to = dst + r * L::kLdRow + c;
    if (r < n)
      cuda_util::copy16_async(to, src + r * stride + c);
    else
      *reinterpret_cast<uint4*>(to) = uint4{0, 0, 0, 0};
  }
}

// Thread tid's share of staging key tile j0's rows of K and V (from offset kv on, nk of
// them) into Ks and Vs: by cp.async where they are bf16, else rounded as they are read.
template <int Dp, typename E>
__device__ void stage_kv(int tid, const E* k, const E* v, i64 kv, i64 stride, int nk, int D,
                         Bf16* Ks, Bf16* Vs) {
  if constexpr (std::is_same_v<E, Bf16>) {
    copy_rows_async<Dp>(tid, k + kv, stride, nk, D, Ks);
    copy_rows_async<Dp>(tid, v + kv, stride, nk, D, Vs);
  } else {
    fl::stage_rows<Dp>(tid, k + kv, stride, nk, D, Ks);
    fl::stage_rows<Dp>(tid, v + kv, stride, nk, D, Vs);
  }
}

// The forward on Q, K, V in E: float (each tile rounded to bf16 as it is staged) or bf16 as
// it lies in global memory, whose K and V tiles then come by cp.async into two stages, the
// next tile in flight while the warps work on this one (D a multiple of 8).
template <int Dp, typename E>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(const E* q, const E* k, const E* v, const i64* qpos, const i64* kstart,
                         const Window* windows, i64 Tq, i64 Tk, int Hq, int Hkv, int D,
                         float scale2, float* o, float* lse) {
  using L = fl::Layout<Dp>;
  constexpr bool kAsync = std::is_same_v<E, Bf16>;
  constexpr int kStages = kAsync ? 2 : 1;
  extern __shared__ __align__(16) unsigned char smem[];
  Bf16* Qs = reinterpret_cast<Bf16*>(smem);
  Bf16* K0 = Qs + L::kRowElems;            // stage s's K tile: K0 + s kRowElems
  Bf16* V0 = K0 + kStages * L::kRowElems;  // and its V tile (rows, as V lies)
  const int tid = int(threadIdx.x), warp = tid / mma::kWarp, lane = tid % mma::kWarp;
  const QueryTile qt(Tq, Hq, Hkv, warp, lane);
  const i64 tiles = qt.tiles, tile = qt.tile, i0 = qt.i0, b = qt.b;
  const int h = qt.h, kh = qt.kh, nr = qt.nr, r0 = qt.r0;
  fl::stage_rows<Dp>(tid, q + at(b, i0, Tq, h, Hq, D), i64(Hq) * D, nr, D, Qs);
  const Window win = windows[b * tiles + tile];
  const Window w[2] = {fl::query_window(qpos, kstart, b, Tq, i0 + r0),
                       fl::query_window(qpos, kstart, b, Tq, i0 + r0 + 8)};
  const i64 stride = i64(Hkv) * D;
  // Key tile j0 into stage s.
  auto stage = [=](i64 j0, int s) {
    stage_kv<Dp>(tid, k, v, at(b, j0, Tk, kh, Hkv, D), stride,
                 int(Tk - j0 < kTile ? Tk - j0 : kTile), D, K0 + s * L::kRowElems,
                 V0 + s * L::kRowElems);
  };
  i64 j0 = fl::first_key_tile(win);
  if constexpr (kAsync) {
    if (D < Dp)  // the padding columns of every stage, never copied into
      for (int x = tid; x < 2 * kStages * kTile * (Dp - D); x += kThreads) {
        const int r = x / (Dp - D);
        K0[(r / kTile) * L::kRowElems + (r % kTile) * L::kLdRow + D + x % (Dp - D)] = Bf16{};
      }
    if (j0 <= win.hi) stage(j0, 0);
    cuda_util::async_commit();
  }
  FragC acc[Dp / 8];
  float m[2] = {fl::kNoMax, fl::kNoMax}, l[2] = {0.0f, 0.0f};
  for (int it = 0; j0 <= win.hi; j0 += kTile, ++it) {
    // Also the barrier after the last tile's reads of its stage (and the staging of Qs).
    const bool seen = __syncthreads_or(fl::meets(w[0], j0) || fl::meets(w[1], j0));
    const int st = it % kStages;
    if constexpr (kAsync) {
      if (j0 + kTile <= win.hi) stage(j0 + kTile, 1 - st);  // the stage tile it - 1 read
      cuda_util::async_commit();                            // (empty past the last tile)
      if (!seen) continue;
      cuda_util::async_wait<1>();  // this tile's copies have landed; the next one's may not
    } else {
      if (!seen) continue;
      stage(j0, 0);
    }
    __syncthreads();
    const Bf16 *Ks = K0 + st * L::kRowElems, *Vs = V0 + st * L::kRowElems;
    FragC s[kTile / 8];
    GDN_FLASH_UNROLL
    for (int ks = 0; ks < Dp; ks += 16) {
      const FragA a = fl::frag_a(lane, Qs + warp * 16 * L::kLdRow + ks, L::kLdRow);
      GDN_FLASH_UNROLL
      for (int c = 0; c < kTile / 8; ++c)
        mma::mma_bf16(s[c], a, fl::frag_b(lane, Ks + c * 8 * L::kLdRow + ks, L::kLdRow));
    }
    fl::scale_mask(lane, s, scale2, j0, w);
    float mx[2], mu[2], alpha[2];
    fl::lane_row_max(s, mx);
    GDN_FLASH_UNROLL
    for (int e = 0; e < 2; ++e) alpha[e] = fl::online_step(m[e], l[e], quad_max(mx[e]), mu[e]);
    fl::rescale(acc, alpha);
    fl::exponentiate(s, mu, l);
    GDN_FLASH_UNROLL
    for (int kk = 0; kk < fl::kSlices; ++kk) {
      const FragA p = mma::c_pair_to_a(s[2 * kk], s[2 * kk + 1]);
      GDN_FLASH_UNROLL
      for (int n = 0; n < Dp / 8; ++n)
        mma::mma_bf16(acc[n], p,
                      fl::frag_b_rows(lane, Vs + kk * 16 * L::kLdRow + n * 8, L::kLdRow));
    }
  }
  float inv[2];
  GDN_FLASH_UNROLL
  for (int e = 0; e < 2; ++e) {
    l[e] = quad_sum(l[e]);
    inv[e] = fl::inverse_sum(l[e]);
  }
  GDN_FLASH_UNROLL
  for (int n = 0; n < Dp / 8; ++n) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e) {
    const int r = warp * 16 + mma::c_row(lane, e), d = n * 8 + mma::c_col(lane, e);
    if (r < nr && d < D) o[at(b, i0 + r, Tq, h, Hq, D) + d] = acc[n].c[e] * inv[e / 2];
  }
  if (lane % 4 == 0)
    for (int e = 0; e < 2; ++e)
      if (r0 + 8 * e < nr) lse[(b * Tq + i0 + r0 + 8 * e) * Hq + h] = fl::natural_lse(m[e], l[e]);
}

// The backward's two products of one 16-row slice kk of the other side's tile, over the
// Dp head columns: s[c] = A X_c^T and, with kTwo, t[c] = A2 Y_c^T, where A and A2 are the
// warp's 16 rows (at a, a2) and X_c, Y_c rows kk 16 + 8c of x and y. The dQ kernel's S and
// dP (Q K^T, dO V^T), the dK kernel's S^T and dP^T (K Q^T, V dO^T), the dV kernel's S^T.
template <int Dp, bool kTwo>
__device__ __forceinline__ void slice_products(int lane, int kk, const Bf16* a, const Bf16* x,
                                               const Bf16* a2, const Bf16* y, FragC (&s)[2],
                                               FragC (&t)[2]) {
  using L = fl::Layout<Dp>;
  GDN_FLASH_UNROLL_BY(2)
  for (int ks = 0; ks < Dp; ks += 16) {
    const FragA fa = fl::frag_a(lane, a + ks, L::kLdRow);
    GDN_FLASH_UNROLL
    for (int c = 0; c < 2; ++c)
      mma::mma_bf16(s[c], fa, fl::frag_b(lane, x + (kk * 16 + c * 8) * L::kLdRow + ks, L::kLdRow));
    if constexpr (kTwo) {
      const FragA fa2 = fl::frag_a(lane, a2 + ks, L::kLdRow);
      GDN_FLASH_UNROLL
      for (int c = 0; c < 2; ++c)
        mma::mma_bf16(t[c], fa2,
                      fl::frag_b(lane, y + (kk * 16 + c * 8) * L::kLdRow + ks, L::kLdRow));
    }
  }
}

// dQ = scale dS K by query tile, the key tiles in order; each 16-key slice makes S and
// dP (Q K^T, dO V^T) and dS in registers, then dQ += dS K.
template <int Dp, typename E>
__global__ void __launch_bounds__(kThreads)
    flash_dq_kernel(const E* q, const E* k, const E* v, const float* lse, const float* dout,
                    const float* delta, const i64* qpos, const i64* kstart, const Window* windows,
                    i64 Tq, i64 Tk, int Hq, int Hkv, int D, float scale2, float scale, float* dq) {
  using L = fl::Layout<Dp>;
  extern __shared__ __align__(16) unsigned char smem[];
  Bf16* Qs = reinterpret_cast<Bf16*>(smem);
  Bf16* Gs = Qs + L::kRowElems;  // dO
  Bf16* Ks = Gs + L::kRowElems;
  Bf16* Vs = Ks + L::kRowElems;
  const int tid = int(threadIdx.x), warp = tid / mma::kWarp, lane = tid % mma::kWarp;
  const QueryTile qt(Tq, Hq, Hkv, warp, lane);
  const i64 tiles = qt.tiles, tile = qt.tile, i0 = qt.i0, b = qt.b;
  const int h = qt.h, kh = qt.kh, nr = qt.nr, r0 = qt.r0;
  fl::stage_rows<Dp>(tid, q + at(b, i0, Tq, h, Hq, D), i64(Hq) * D, nr, D, Qs);
  fl::stage_rows<Dp>(tid, dout + at(b, i0, Tq, h, Hq, D), i64(Hq) * D, nr, D, Gs);
  const Window win = windows[b * tiles + tile];
  Window w[2];
  float lse2[2], dl[2];
  for (int e = 0; e < 2; ++e) {
    const i64 i = i0 + r0 + 8 * e, row = (b * Tq + i) * Hq + h;
    w[e] = fl::query_window(qpos, kstart, b, Tq, i);
    lse2[e] = i < Tq ? lse[row] * fl::kLog2e : 0.0f;
    dl[e] = i < Tq ? delta[row] : 0.0f;
  }
  FragC acc[Dp / 8];
  for (i64 j0 = fl::first_key_tile(win); j0 <= win.hi; j0 += kTile) {
    if (!__syncthreads_or(fl::meets(w[0], j0) || fl::meets(w[1], j0))) continue;
    const int nk = int(Tk - j0 < kTile ? Tk - j0 : kTile);
    const i64 kv = at(b, j0, Tk, kh, Hkv, D), stride = i64(Hkv) * D;
    fl::stage_rows<Dp>(tid, k + kv, stride, nk, D, Ks);
    fl::stage_rows<Dp>(tid, v + kv, stride, nk, D, Vs);
    __syncthreads();
    GDN_FLASH_UNROLL_BY(1)
    for (int kk = 0; kk < fl::kSlices; ++kk) {
      FragC s[2], dp[2];
      slice_products<Dp, true>(lane, kk, Qs + warp * 16 * L::kLdRow, Ks, Gs + warp * 16 * L::kLdRow,
                               Vs, s, dp);
      fl::query_major_grads(lane, s, dp, scale2, j0 + kk * 16, w, lse2, dl);
      const FragA ds = mma::c_pair_to_a(s[0], s[1]);
      GDN_FLASH_UNROLL
      for (int n = 0; n < Dp / 8; ++n)
        mma::mma_bf16(acc[n], ds,
                      fl::frag_b_rows(lane, Ks + kk * 16 * L::kLdRow + n * 8, L::kLdRow));
    }
  }
  GDN_FLASH_UNROLL
  for (int n = 0; n < Dp / 8; ++n) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e) {
    const int r = warp * 16 + mma::c_row(lane, e), d = n * 8 + mma::c_col(lane, e);
    if (r < nr && d < D) dq[at(b, i0 + r, Tq, h, Hq, D) + d] = scale * acc[n].c[e];
  }
}

// dV = P^T dO (kDk false) or dK = scale dS^T Q (kDk true) by key tile: a warp owns 16 keys;
// the query heads of the group, then the query tiles, in order, each in 16-query slices of
// S^T = K Q^T (and dP^T = V dO^T).
template <int Dp, bool kDk, typename E>
__global__ void __launch_bounds__(kThreads)
    flash_dkv_kernel(const E* q, const E* k, const E* v, const float* lse, const float* dout,
                     const float* delta, const i64* qpos, const i64* kstart, const Window* windows,
                     i64 Tq, i64 Tk, int Hq, int Hkv, int D, float scale2, float scale,
                     float* out) {
  using L = fl::Layout<Dp>;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Window win_s[kTile];
  __shared__ float lse2_s[kTile], delta_s[kTile];
  Bf16* Ks = reinterpret_cast<Bf16*>(smem);
  Bf16* Qs = Ks + L::kRowElems;
  Bf16* Gs = Qs + L::kRowElems;   // dO
  Bf16* Vs = Gs + L::kRowElems;   // dK only
  const Bf16* X = kDk ? Qs : Gs;  // the accumulation's B: dK = dS^T Q, dV = P^T dO
  const int tid = int(threadIdx.x), warp = tid / mma::kWarp, lane = tid % mma::kWarp;
  const i64 tiles = (Tq + kTile - 1) / kTile, j0 = i64(blockIdx.x) * kTile;
  const i64 b = blockIdx.y / Hkv;
  const int kh = int(blockIdx.y % Hkv), G = Hq / Hkv;
  const int nk = int(Tk - j0 < kTile ? Tk - j0 : kTile), r0 = lane_row(warp, lane);
  const i64 kv = at(b, j0, Tk, kh, Hkv, D);
  fl::stage_rows<Dp>(tid, k + kv, i64(Hkv) * D, nk, D, Ks);
  if constexpr (kDk) fl::stage_rows<Dp>(tid, v + kv, i64(Hkv) * D, nk, D, Vs);
  const i64 j[2] = {j0 + r0, j0 + r0 + 8};
  FragC acc[Dp / 8];
  for (int h = kh * G; h < (kh + 1) * G; ++h)
    for (i64 tile = 0; tile < tiles; ++tile) {
      if (!fl::meets(windows[b * tiles + tile], j0)) continue;  // the same in every thread
      const i64 i0 = tile * kTile;
      const int nr = int(Tq - i0 < kTile ? Tq - i0 : kTile);
      __syncthreads();  // the previous tile's reads are done
      if (tid < kTile) {
        const i64 i = i0 + tid, row = (b * Tq + i) * Hq + h;
        win_s[tid] = fl::query_window(qpos, kstart, b, Tq, i);
        lse2_s[tid] = i < Tq ? lse[row] * fl::kLog2e : 0.0f;
        delta_s[tid] = i < Tq && kDk ? delta[row] : 0.0f;
      }
      const i64 qo = at(b, i0, Tq, h, Hq, D), stride = i64(Hq) * D;
      fl::stage_rows<Dp>(tid, q + qo, stride, nr, D, Qs);
      fl::stage_rows<Dp>(tid, dout + qo, stride, nr, D, Gs);
      __syncthreads();
      GDN_FLASH_UNROLL_BY(1)
      for (int kk = 0; kk < fl::kSlices; ++kk) {
        FragC s[2], dp[2];
        slice_products<Dp, kDk>(lane, kk, Ks + warp * 16 * L::kLdRow, Qs,
                                Vs + warp * 16 * L::kLdRow, Gs, s, dp);
        fl::key_major_probs(lane, s, scale2, j, win_s, lse2_s, kk * 16);
        if constexpr (kDk) fl::key_major_grads(lane, s, dp, delta_s, kk * 16);
        const FragA a = mma::c_pair_to_a(s[0], s[1]);
        GDN_FLASH_UNROLL
        for (int n = 0; n < Dp / 8; ++n)
          mma::mma_bf16(acc[n], a,
                        fl::frag_b_rows(lane, X + kk * 16 * L::kLdRow + n * 8, L::kLdRow));
      }
    }
  const float f = kDk ? scale : 1.0f;
  GDN_FLASH_UNROLL
  for (int n = 0; n < Dp / 8; ++n) GDN_FLASH_UNROLL
  for (int e = 0; e < 4; ++e) {
    const int r = warp * 16 + mma::c_row(lane, e), d = n * 8 + mma::c_col(lane, e);
    if (r < nk && d < D) out[at(b, j0 + r, Tk, kh, Hkv, D) + d] = f * acc[n].c[e];
  }
}

// Shared memory of a kernel holding `rows` bf16 row tiles, in bytes.
template <int Dp>
constexpr std::size_t bytes(int rows) {
  return std::size_t(rows) * fl::Layout<Dp>::kRowElems * sizeof(Bf16);
}

template <typename Kernel>
void allow_shared(Kernel kernel, std::size_t shared) {
  GDN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
}

struct Problem {
  const i64 *qpos, *kstart;
  int B;
  i64 Tq, Tk;
  int Hq, Hkv, D;
  float scale, scale2;
  i64 tiles() const { return (Tq + kTile - 1) / kTile; }
};

// Q, then K and V in one stage (float) or two (bf16, cp.async).
template <int Dp, typename E>
void forward(const Problem& p, const E* q, const E* k, const E* v, const Window* windows, float* o,
             float* lse) {
  const std::size_t shared = bytes<Dp>(std::is_same_v<E, Bf16> ? 5 : 3);
  allow_shared(flash_forward_kernel<Dp, E>, shared);
  const dim3 grid(unsigned(p.tiles()), unsigned(p.B * p.Hq));
  flash_forward_kernel<Dp, E><<<grid, kThreads, shared>>>(q, k, v, p.qpos, p.kstart, windows, p.Tq,
                                                          p.Tk, p.Hq, p.Hkv, p.D, p.scale2, o, lse);
  cuda_util::check_launch();
}

template <int Dp, typename E>
void backward(const Problem& p, const E* q, const E* k, const E* v, const float* lse,
              const float* dout, const float* delta, const Window* windows, float* dq, float* dk,
              float* dv) {
  if (dq && p.Tq > 0) {
    const std::size_t shared = bytes<Dp>(4);
    allow_shared(flash_dq_kernel<Dp, E>, shared);
    const dim3 grid(unsigned(p.tiles()), unsigned(p.B * p.Hq));
    flash_dq_kernel<Dp, E><<<grid, kThreads, shared>>>(q, k, v, lse, dout, delta, p.qpos, p.kstart,
                                                       windows, p.Tq, p.Tk, p.Hq, p.Hkv, p.D,
                                                       p.scale2, p.scale, dq);
    cuda_util::check_launch();
  }
  const dim3 grid(unsigned((p.Tk + kTile - 1) / kTile), unsigned(p.B * p.Hkv));
  if (dk && p.Tk > 0) {
    const std::size_t shared = bytes<Dp>(4);
    allow_shared(flash_dkv_kernel<Dp, true, E>, shared);
    flash_dkv_kernel<Dp, true, E><<<grid, kThreads, shared>>>(q, k, v, lse, dout, delta, p.qpos,
                                                              p.kstart, windows, p.Tq, p.Tk, p.Hq,
                                                              p.Hkv, p.D, p.scale2, p.scale, dk);
    cuda_util::check_launch();
  }
  if (dv && p.Tk > 0) {
    const std::size_t shared = bytes<Dp>(3);
    allow_shared(flash_dkv_kernel<Dp, false, E>, shared);
    flash_dkv_kernel<Dp, false, E><<<grid, kThreads, shared>>>(q, k, v, lse, dout, delta, p.qpos,
                                                               p.kstart, windows, p.Tq, p.Tk, p.Hq,
                                                               p.Hkv, p.D, p.scale2, p.scale, dv);
    cuda_util::check_launch();
  }
}

Problem problem(const i64* qpos, const i64* kstart, int B, i64 Tq, i64 Tk, int Hq, int Hkv, int D,
                double scale) {
  GDN_CHECK(flash_attention_supports(D), "flash attention: head_dim ", D, " is not in [1, ",
            fl::kMaxDim, "]");
  GDN_CHECK(i64(B) * Hq <= 65535, "flash attention: B * Hq = ", i64(B) * Hq,
            " is past the grid's 65535");
  return {qpos, kstart, B, Tq, Tk, Hq, Hkv, D, float(scale), float(scale * double(fl::kLog2e))};
}

// The window union of every (b, query tile), on the device.
void tile_windows(const Problem& p, Window* out) {
  const i64 n = p.B * p.tiles();
  if (n == 0) return;
  tile_window_kernel<<<cuda_util::blocks_for(n), cuda_util::kThreads>>>(p.qpos, p.kstart, p.B, p.Tq,
                                                                        p.tiles(), out);
  cuda_util::check_launch();
}

}  // namespace

bool flash_attention_chosen(int D, Precision p) {
  // cuDNN's choice falls back to flash where cuDNN refuses (attention_cuda.cu).
  return flash_attention_supports(D) &&
         attention_kernel(attention_backend(), p, D, false) != AttentionKernel::exact;
}

namespace {

template <typename E>
void run_forward(const E* q, const E* k, const E* v, const i64* qpos, int B, i64 Tq, i64 Tk, int Hq,
                 int Hkv, int D, double scale, float* o, float* lse, const i64* kstart) {
  const Problem p = problem(qpos, kstart, B, Tq, Tk, Hq, Hkv, D, scale);
  if constexpr (std::is_same_v<E, Bf16>) {
    GDN_CHECK(D % 8 == 0, "flash attention on bf16 inputs: head_dim ", D,
              " is not a multiple of 8 (the rows are copied 16 bytes at a time)");
    GDN_CHECK(reinterpret_cast<std::uintptr_t>(k) % 16 == 0 &&
                  reinterpret_cast<std::uintptr_t>(v) % 16 == 0,
              "flash attention on bf16 inputs: k or v is not 16-byte aligned");
  }
  if (i64(B) * Tq * Hq == 0) return;
  cuda_util::Scratch<Window> windows{std::size_t(B * p.tiles())};
  tile_windows(p, windows.get());
  switch (fl::padded_dim(D)) {
    case 64:
      forward<64>(p, q, k, v, windows.get(), o, lse);
      break;
    case 128:
      forward<128>(p, q, k, v, windows.get(), o, lse);
      break;
    default:
      forward<256>(p, q, k, v, windows.get(), o, lse);
      break;
  }
}

template <typename E>
void run_backward(const E* q, const E* k, const E* v, const float* o, const float* lse,
                  const float* dout, const i64* qpos, int B, i64 Tq, i64 Tk, int Hq, int Hkv, int D,
                  double scale, float* dq, float* dk, float* dv, const i64* kstart) {
  const Problem p = problem(qpos, kstart, B, Tq, Tk, Hq, Hkv, D, scale);
  const i64 rows = i64(B) * Tq * Hq;
  if (B == 0) return;
  cuda_util::Scratch<float> delta{std::size_t(rows)};
  if (rows > 0) {
    flash_delta_kernel<<<cuda_util::row_blocks(rows), cuda_util::kThreads>>>(dout, o, rows, D,
                                                                             delta.get());
    cuda_util::check_launch();
  }
  cuda_util::Scratch<Window> windows{std::size_t(B * p.tiles())};
  tile_windows(p, windows.get());
  switch (fl::padded_dim(D)) {
    case 64:
      backward<64>(p, q, k, v, lse, dout, delta.get(), windows.get(), dq, dk, dv);
      break;
    case 128:
      backward<128>(p, q, k, v, lse, dout, delta.get(), windows.get(), dq, dk, dv);
      break;
    default:
      backward<256>(p, q, k, v, lse, dout, delta.get(), windows.get(), dq, dk, dv);
      break;
  }
}

}  // namespace

void flash_attention_forward(Cuda, const float* q, const float* k, const float* v, const i64* qpos,
                             int B, i64 Tq, i64 Tk, int Hq, int Hkv, int D, double scale, float* o,
                             float* lse, const i64* kstart) {
  run_forward(q, k, v, qpos, B, Tq, Tk, Hq, Hkv, D, scale, o, lse, kstart);
}
void flash_attention_forward(Cuda, const Bf16* q, const Bf16* k, const Bf16* v, const i64* qpos,
                             int B, i64 Tq, i64 Tk, int Hq, int Hkv, int D, double scale, float* o,
                             float* lse, const i64* kstart) {
  run_forward(q, k, v, qpos, B, Tq, Tk, Hq, Hkv, D, scale, o, lse, kstart);
}

void flash_attention_backward(Cuda, const float* q, const float* k, const float* v, const float* o,
                              const float* lse, const float* dout, const i64* qpos, int B, i64 Tq,
                              i64 Tk, int Hq, int Hkv, int D, double scale, float* dq, float* dk,
                              float* dv, const i64* kstart) {
  run_backward(q, k, v, o, lse, dout, qpos, B, Tq, Tk, Hq, Hkv, D, scale, dq, dk, dv, kstart);
}
void flash_attention_backward(Cuda, const Bf16* q, const Bf16* k, const Bf16* v, const float* o,
                              const float* lse, const float* dout, const i64* qpos, int B, i64 Tq,
                              i64 Tk, int Hq, int Hkv, int D, double scale, float* dq, float* dk,
                              float* dv, const i64* kstart) {
  run_backward(q, k, v, o, lse, dout, qpos, B, Tq, Tk, Hq, Hkv, D, scale, dq, dk, dv, kstart);
}

}  // namespace gdn::ops
