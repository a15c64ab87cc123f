// Attention on the host, flash-attention style: nothing of size [Tq, Tk] is stored. A unit
// of work is a tile of up to kRowBlock query rows against the keys in blocks of kKeyBlock;
// scores, probabilities and their products with V, dO, K and Q are tile GEMMs (la::gemm),
// the softmax is online (one rescale per key block) and exponentiates whole rows (la::
// exp_in_place). Key blocks past every row of a tile are never visited.
//
// Determinism: the units are fixed by the shapes and every output element has one owner
// that sums in a fixed order, so the bits do not depend on OMP_NUM_THREADS (the dynamic
// schedule only balances the causal triangle's uneven work). Masked entries are exact
// zeros in every product, so a row's values do not depend on its tile mates either.
// T = double computes in double (the exact path); T = float in float, as a GPU kernel would.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.h"
#include "ops/attention/attention.h"
#include "ops/attention/flash_attention.h"
#include "ops/gemm/exp.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/simd.h"

namespace gdn::ops {

using i64 = std::int64_t;

namespace {

// 48 rows: whole register tiles of both GEMM kernels (6 rows on AVX2, 8 on AVX-512), and
// K, V blocks reused by enough rows; 64 keys: the exp and rescale work per GEMM stays small.
constexpr int kRowBlock = 48;
constexpr int kKeyBlock = 64;

void check_args(const i64* qpos, const i64* kstart, int B, i64 Tq, i64 Tk, int Hq, int Hkv) {
  GDN_CHECK(Hkv > 0 && Hq % Hkv == 0, "attention: Hq = ", Hq,
            " query heads is not a multiple of Hkv = ", Hkv, " kv heads");
  check_attention_positions(qpos, kstart, B, Tq, Tk);
}

// Offset of row (b, t, h) of a [B, T, H, D] tensor.
inline i64 at(int b, i64 t, i64 T, int h, int H, int D) {
  return ((i64(b) * T + t) * H + h) * D;
}

// The largest qpos of each block of kRowBlock query rows: a tile needs key blocks up to it.
std::vector<i64> block_last(const i64* qpos, i64 Tq) {
  std::vector<i64> last((Tq + kRowBlock - 1) / kRowBlock, 0);
  for (i64 i = 0; i < Tq; ++i) last[i / kRowBlock] = std::max(last[i / kRowBlock], qpos[i]);
  return last;
}

// The first key block each block of rows of each batch row needs, [B, row blocks]: its
// rows' smallest kstart, rounded down to a key block (all 0 without documents).
std::vector<i64> block_first(const i64* kstart, int B, i64 Tq) {
  const i64 blocks = (Tq + kRowBlock - 1) / kRowBlock;
  std::vector<i64> first(std::size_t(B * blocks), 0);
  if (!kstart) return first;
  for (i64 b = 0; b < B; ++b)
    for (i64 blk = 0; blk < blocks; ++blk) {
      i64 m = kstart[b * Tq + blk * kRowBlock];
      for (i64 i = blk * kRowBlock; i < std::min(Tq, (blk + 1) * kRowBlock); ++i)
        m = std::min(m, kstart[b * Tq + i]);
      first[std::size_t(b * blocks + blk)] = m / kKeyBlock * kKeyBlock;
    }
  return first;
}

// kstart of query row i of batch row b (0 without documents).
inline i64 first_key(const i64* kstart, int b, i64 Tq, i64 i) {
  return kstart ? kstart[i64(b) * Tq + i] : 0;
}

// The row length of transpose_heads' output: whole key blocks and 16 more elements, so
// that rows are not a power of two bytes apart (rows 8 KiB apart, Tk = 2048 in f32, would
// fall in the same cache sets as a GEMM reads down a column of K^T).
inline i64 transposed_ld(i64 Tk) {
  return (Tk + kKeyBlock - 1) / kKeyBlock * kKeyBlock + 16;
}

// x [B, Tk, H, D] as [B, H, D, ld] (ld = transposed_ld(Tk)): the keys (values) of a block
// are then contiguous columns of a row-major D x ld matrix, which la::gemm reads in place
// as op(B) = K^T.
template <typename T>
void transpose_heads(const T* x, int B, i64 Tk, int H, int D, std::vector<T>& out) {
  const i64 ld = transposed_ld(Tk);
  out.resize(std::size_t(B) * H * D * ld);
  const i64 tblocks = (Tk + kKeyBlock - 1) / kKeyBlock;
#pragma omp parallel for schedule(static)
  for (i64 u = 0; u < i64(B) * H * tblocks; ++u) {
    const int b = int(u / (H * tblocks)), h = int(u / tblocks % H);
    const i64 t0 = u % tblocks * kKeyBlock, t1 = std::min(Tk, t0 + kKeyBlock);
    T* dst = out.data() + (i64(b) * H + h) * D * ld;
    for (i64 t = t0; t < t1; ++t)
      for (int d = 0; d < D; ++d) dst[d * ld + t] = x[at(b, t, Tk, h, H, D) + d];
  }
}

// x [B, T, H, D] as [B, H, T, D]: a head's rows then lie D apart, one contiguous block,
// where in place they lie H D apart (a power of two bytes, often: rows of a tile would
// share cache sets).
template <typename T>
void heads_major(const T* x, int B, i64 Tn, int H, int D, std::vector<T>& out) {
  out.resize(std::size_t(B) * H * Tn * D);
#pragma omp parallel for schedule(static)
  for (i64 bt = 0; bt < i64(B) * Tn; ++bt) {
    const i64 b = bt / Tn, t = bt % Tn;
    for (int h = 0; h < H; ++h)
      std::copy_n(x + at(int(b), t, Tn, h, H, D), D, out.data() + ((b * H + h) * Tn + t) * D);
  }
}

// The scores of a tile after the causal mask: s[r, c] (row stride kKeyBlock) for key
// j0 + c, c < nk; keys before kstart or past qpos[r] become -inf. Returns whether row r
// has any key left.
template <typename T>
bool mask_row(T* s, i64 kstart, i64 qpos, i64 j0, int nk) {
  const i64 lo = std::clamp<i64>(kstart - j0, 0, nk), hi = std::clamp<i64>(qpos - j0 + 1, lo, nk);
  constexpr T kMasked = -std::numeric_limits<T>::infinity();
  std::fill(s, s + lo, kMasked);
  std::fill(s + hi, s + nk, kMasked);
  return hi > lo;
}

// p = exp(s - m) over one row of nk scores, masked ones exactly 0.
template <typename T>
void exp_shifted(T* s, T m, int nk) {
  for (int c = 0; c < nk; ++c) s[c] -= m;
  la::exp_in_place(s, nk);
}

// The largest of s[0, nk) (exact in any order; vector lanes for float).
inline float row_max(const float* s, int nk) {
  using V = simd::Vec<float>;
  constexpr int L = simd::kLanes<float>;
  V mx = simd::broadcast(-std::numeric_limits<float>::infinity());
  int c = 0;
  for (; c + L <= nk; c += L) {
    const V x = simd::load(s + c);
    mx = x > mx ? x : mx;
  }
  float out = mx[0];
  for (int e = 1; e < L; ++e) out = std::max(out, mx[e]);
  for (; c < nk; ++c) out = std::max(out, s[c]);
  return out;
}
inline double row_max(const double* s, int nk) {
  return *std::max_element(s, s + nk);
}

// sum of s[0, nk): element c into lane c mod L, the lanes then in order, so a value's place
// in the sum depends on its key's position only (a row's tile mates add exact zeros).
// s must hold whole vectors: the tail up to a multiple of L is zeroed here.
inline float row_sum(float* s, int nk) {
  using V = simd::Vec<float>;
  constexpr int L = simd::kLanes<float>;
  std::fill(s + nk, s + (nk + L - 1) / L * L, 0.0f);
  V acc{};
  for (int c = 0; c < nk; c += L) acc += simd::load(s + c);
  float out = 0;
  for (int e = 0; e < L; ++e) out += acc[e];
  return out;
}
inline double row_sum(double* s, int nk) {
  double out = 0;
  for (int c = 0; c < nk; ++c) out += s[c];
  return out;
}

// One tile's probabilities for the backward: S = scale Q K^T, P = exp(S - lse) masked,
// then dS = P (dO V^T - delta) in ds. p and ds are nr x kKeyBlock.
template <typename T>
void tile_probabilities(const T* q, int ldq, const T* kt, const T* vt, i64 ld, const T* dout,
                        const T* lse, const T* delta, const i64* qpos, const i64* kfirst, int nr,
                        i64 j0, int nk, int D, T scale, T* p, T* ds) {
  la::gemm(false, false, nr, nk, D, scale, q, ldq, kt + j0, int(ld), T(0), p, kKeyBlock);
  la::gemm(false, false, nr, nk, D, T(1), dout, ldq, vt + j0, int(ld), T(0), ds, kKeyBlock);
  for (int r = 0; r < nr; ++r) {
    T *pr = p + r * kKeyBlock, *dr = ds + r * kKeyBlock;
    mask_row(pr, kfirst ? kfirst[r] : 0, qpos[r], j0, nk);
    exp_shifted(pr, lse[r], nk);
    for (int c = 0; c < nk; ++c) dr[c] = pr[c] * (dr[c] - delta[r]);
  }
}

}  // namespace

void check_attention_positions(const i64* qpos, const i64* kstart, int B, i64 Tq, i64 Tk) {
  for (i64 i = 0; i < Tq; ++i)
    GDN_CHECK(qpos[i] >= 0 && qpos[i] < Tk, "attention: qpos[", i, "] = ", qpos[i],
              " is out of range [0, Tk = ", Tk, ")");
  for (i64 i = 0; kstart && i < i64(B) * Tq; ++i)
    GDN_CHECK(kstart[i] >= 0 && kstart[i] <= qpos[i % Tq], "attention: kstart[", i,
              "] = ", kstart[i], " is out of range [0, qpos = ", qpos[i % Tq], "]");
}

template <typename T>
void attention_forward(Host, Precision, const T* q, const T* k, const T* v, const i64* qpos, int B,
                       i64 Tq, i64 Tk, int Hq, int Hkv, int D, double scale, T* o, T* lse,
                       const i64* kstart) {
  // Before the parallel region: exceptions cannot leave it.
  check_args(qpos, kstart, B, Tq, Tk, Hq, Hkv);
  const int G = Hq / Hkv;
  const std::vector<i64> last = block_last(qpos, Tq), first = block_first(kstart, B, Tq);
  const i64 blocks = i64(last.size()), units = i64(B) * Hq * blocks;
  // K transposed, Q and V by head. Reused across calls (no page faults per step); each
  // thread has its own, so the parallel regions below read them through pointers.
  thread_local std::vector<T> kt_buf, qh_buf, vh_buf;
  transpose_heads(k, B, Tk, Hkv, D, kt_buf);
  heads_major(q, B, Tq, Hq, D, qh_buf);
  heads_major(v, B, Tk, Hkv, D, vh_buf);
  const T *kt = kt_buf.data(), *qh = qh_buf.data(), *vh = vh_buf.data();
  const i64 ld = transposed_ld(Tk);
  constexpr T kNoMax = -std::numeric_limits<T>::infinity();
#pragma omp parallel
  {
    // The tile's scores (then probabilities), and per row the running max m, the sum l
    // and l times the output in acc.
    std::vector<T> s(kRowBlock * kKeyBlock), acc(kRowBlock * D), m(kRowBlock), l(kRowBlock);
#pragma omp for schedule(dynamic)
    for (i64 u = 0; u < units; ++u) {
      const int b = int(u / (Hq * blocks)), h = int(u / blocks % Hq), kh = h / G;
      const i64 blk = u % blocks, i0 = blk * kRowBlock;
      const int nr = int(std::min<i64>(kRowBlock, Tq - i0));
      const T* qt = qh + ((i64(b) * Hq + h) * Tq + i0) * D;
      const T* kth = kt + (i64(b) * Hkv + kh) * D * ld;
      const T* vth = vh + (i64(b) * Hkv + kh) * Tk * D;
      std::fill_n(acc.begin(), nr * D, T(0));
      std::fill_n(m.begin(), nr, kNoMax);
      std::fill_n(l.begin(), nr, T(0));
      for (i64 j0 = first[std::size_t(b * blocks + blk)]; j0 <= last[blk]; j0 += kKeyBlock) {
        const int nk = int(std::min<i64>(kKeyBlock, last[blk] + 1 - j0));
        la::gemm(false, false, nr, nk, D, T(scale), qt, D, kth + j0, int(ld), T(0), s.data(),
                 kKeyBlock);
        for (int r = 0; r < nr; ++r) {
          T* sr = &s[r * kKeyBlock];
          if (!mask_row(sr, first_key(kstart, b, Tq, i0 + r), qpos[i0 + r], j0, nk)) {
            std::fill_n(sr, nk, T(0));
            continue;
          }
          const T mb = std::max(m[r], row_max(sr, nk));
          if (mb > m[r]) {  // a new max: rescale what was summed against the old one
            const T c = std::exp(m[r] - mb);
            l[r] *= c;
            for (int d = 0; d < D; ++d) acc[r * D + d] *= c;
            m[r] = mb;
          }
          exp_shifted(sr, m[r], nk);
          l[r] += row_sum(sr, nk);
        }
        la::gemm(false, false, nr, D, nk, T(1), s.data(), kKeyBlock, vth + j0 * D, D, T(1),
                 acc.data(), D);
      }
      for (int r = 0; r < nr; ++r) {
        const i64 row = (i64(b) * Tq + i0 + r) * Hq + h;
        for (int d = 0; d < D; ++d) o[row * D + d] = acc[r * D + d] / l[r];
        lse[row] = m[r] + std::log(l[r]);
      }
    }
  }
}

template <typename T>
void attention_backward(Host, Precision, const T* q, const T* k, const T* v, const T* o,
                        const T* lse, const T* dout, const i64* qpos, int B, i64 Tq, i64 Tk, int Hq,
                        int Hkv, int D, double scale, T* dq, T* dk, T* dv, const i64* kstart) {
  // With P = exp(S - lse), S = scale Q K^T and delta_i = dout_i . o_i: dS = P (dO V^T -
  // delta), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO. dQ sums over keys and dK, dV
  // over queries; two passes, each giving every output one owner, keep both sums in a
  // fixed order while parallel, at the price of computing P twice. One pass owning a
  // whole (b, kv head) would have only B Hkv units of work.
  check_args(qpos, kstart, B, Tq, Tk, Hq, Hkv);
  const int G = Hq / Hkv;
  const std::vector<i64> last = block_last(qpos, Tq), first = block_first(kstart, B, Tq);
  const i64 blocks = i64(last.size());
  // delta and lse per (b, h) row block, contiguous: [B, Hq, Tq].
  std::vector<T> delta(std::size_t(B) * Hq * Tq), lse_t(delta.size());
#pragma omp parallel for schedule(static)
  for (i64 r = 0; r < i64(delta.size()); ++r) {
    const i64 b = r / (Hq * Tq), h = r / Tq % Hq, i = r % Tq, row = (b * Tq + i) * Hq + h;
    double s = 0;
    for (int d = 0; d < D; ++d) s += double(dout[row * D + d]) * double(o[row * D + d]);
    delta[r] = T(s);
    lse_t[r] = lse[row];
  }
  thread_local std::vector<T> kt_buf, vt_buf, qh_buf, gh_buf, kh_buf;  // as in the forward
  transpose_heads(k, B, Tk, Hkv, D, kt_buf);
  transpose_heads(v, B, Tk, Hkv, D, vt_buf);
  heads_major(q, B, Tq, Hq, D, qh_buf);
  heads_major(dout, B, Tq, Hq, D, gh_buf);
  if (dq) heads_major(k, B, Tk, Hkv, D, kh_buf);
  const T *kt = kt_buf.data(), *vt = vt_buf.data(), *qh = qh_buf.data(), *gh = gh_buf.data(),
          *kh_rows = kh_buf.data();
  const i64 ld = transposed_ld(Tk);

  if (dq) {  // units as in the forward: a tile of rows of one (b, h)
    const i64 units = i64(B) * Hq * blocks;
#pragma omp parallel
    {
      std::vector<T> p(kRowBlock * kKeyBlock), ds(kRowBlock * kKeyBlock), acc(kRowBlock * D);
#pragma omp for schedule(dynamic)
      for (i64 u = 0; u < units; ++u) {
        const int b = int(u / (Hq * blocks)), h = int(u / blocks % Hq), kh = h / G;
        const i64 blk = u % blocks, i0 = blk * kRowBlock, bh = (i64(b) * Hq + h) * Tq + i0;
        const int nr = int(std::min<i64>(kRowBlock, Tq - i0));
        const i64 kv = (i64(b) * Hkv + kh) * D * ld;
        std::fill_n(acc.begin(), nr * D, T(0));
        const i64* kfirst = kstart ? kstart + i64(b) * Tq + i0 : nullptr;
        for (i64 j0 = first[std::size_t(b * blocks + blk)]; j0 <= last[blk]; j0 += kKeyBlock) {
          const int nk = int(std::min<i64>(kKeyBlock, last[blk] + 1 - j0));
          tile_probabilities(qh + bh * D, D, kt + kv, vt + kv, ld, gh + bh * D, &lse_t[bh],
                             &delta[bh], qpos + i0, kfirst, nr, j0, nk, D, T(scale), p.data(),
                             ds.data());
          la::gemm(false, false, nr, D, nk, T(1), ds.data(), kKeyBlock,
                   kh_rows + ((i64(b) * Hkv + kh) * Tk + j0) * D, D, T(1), acc.data(), D);
        }
        for (int r = 0; r < nr; ++r)
          for (int d = 0; d < D; ++d)
            dq[at(b, i0 + r, Tq, h, Hq, D) + d] = T(scale) * acc[r * D + d];
      }
    }
  }

  if (!dk && !dv) return;
  // A unit is a block of kKeyBlock keys of one (b, kv head); it sums over the query heads
  // of its group, then the row blocks, in order. Keys no query reaches keep zero sums.
  const i64 kblocks = (Tk + kKeyBlock - 1) / kKeyBlock, units = i64(B) * Hkv * kblocks;
#pragma omp parallel
  {
    std::vector<T> p(kRowBlock * kKeyBlock), ds(kRowBlock * kKeyBlock), ak(kKeyBlock * D),
        av(kKeyBlock * D);
#pragma omp for schedule(dynamic)
    for (i64 u = 0; u < units; ++u) {
      const int b = int(u / (Hkv * kblocks)), kh = int(u / kblocks % Hkv);
      const i64 j0 = u % kblocks * kKeyBlock, kv = (i64(b) * Hkv + kh) * D * ld;
      const int nk = int(std::min<i64>(kKeyBlock, Tk - j0));
      std::fill_n(ak.begin(), nk * D, T(0));
      std::fill_n(av.begin(), nk * D, T(0));
      for (int h = kh * G; h < (kh + 1) * G; ++h)
        for (i64 blk = 0; blk < blocks; ++blk) {
          // No row of the block reaches these keys, or all start after them.
          if (last[blk] < j0 || first[std::size_t(b * blocks + blk)] > j0) continue;
          const i64 i0 = blk * kRowBlock, bh = (i64(b) * Hq + h) * Tq + i0;
          const int nr = int(std::min<i64>(kRowBlock, Tq - i0));
          const T *qt = qh + bh * D, *gt = gh + bh * D;
          const i64* kfirst = kstart ? kstart + i64(b) * Tq + i0 : nullptr;
          tile_probabilities(qt, D, kt + kv, vt + kv, ld, gt, &lse_t[bh], &delta[bh], qpos + i0,
                             kfirst, nr, j0, nk, D, T(scale), p.data(), ds.data());
          la::gemm(true, false, nk, D, nr, T(1), p.data(), kKeyBlock, gt, D, T(1), av.data(), D);
          la::gemm(true, false, nk, D, nr, T(scale), ds.data(), kKeyBlock, qt, D, T(1), ak.data(),
                   D);
        }
      for (int j = 0; j < nk; ++j)
        for (int d = 0; d < D; ++d) {
          const i64 off = at(b, j0 + j, Tk, kh, Hkv, D) + d;
          if (dk) dk[off] = ak[j * D + d];
          if (dv) dv[off] = av[j * D + d];
        }
    }
  }
}

template void attention_forward(Host, Precision, const float*, const float*, const float*,
                                const std::int64_t*, int, std::int64_t, std::int64_t, int, int, int,
                                double, float*, float*, const std::int64_t*);
template void attention_forward(Host, Precision, const double*, const double*, const double*,
                                const std::int64_t*, int, std::int64_t, std::int64_t, int, int, int,
                                double, double*, double*, const std::int64_t*);
template void attention_backward(Host, Precision, const float*, const float*, const float*,
                                 const float*, const float*, const float*, const std::int64_t*, int,
                                 std::int64_t, std::int64_t, int, int, int, double, float*, float*,
                                 float*, const std::int64_t*);
template void attention_backward(Host, Precision, const double*, const double*, const double*,
                                 const double*, const double*, const double*, const std::int64_t*,
                                 int, std::int64_t, std::int64_t, int, int, int, double, double*,
                                 double*, double*, const std::int64_t*);

namespace {
std::atomic<AttentionBackend> backend{AttentionBackend::automatic};
}  // namespace

void set_attention_backend(AttentionBackend b) {
  backend = b;
}

AttentionBackend attention_backend() {
  return backend;
}

AttentionKernel attention_kernel(AttentionBackend b, Precision p, int D, bool cudnn_built) {
  const bool bf16 = p == Precision::bf16;
  if (b == AttentionBackend::exact || (b == AttentionBackend::automatic && !bf16))
    return AttentionKernel::exact;
  if (cudnn_built && (b == AttentionBackend::cudnn || b == AttentionBackend::automatic))
    return AttentionKernel::cudnn;
  return flash_attention_supports(D) ? AttentionKernel::flash : AttentionKernel::exact;
}

}  // namespace gdn::ops
