// Attention on the host, flash-attention style: nothing of size [Tq, Tk] is stored, each
// thread holds a block of rows. Every output element is summed by one thread in an order
// fixed by the shapes, so the bits do not depend on OMP_NUM_THREADS (the dynamic schedule
// only balances the causal triangle's uneven work).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.h"
#include "ops/attention/attention.h"

namespace gdn::ops {

using i64 = std::int64_t;

namespace {

constexpr i64 kRowBlock = 16;  // query rows that use each block of keys while it is in cache
constexpr i64 kKeyBlock = 64;  // keys per online-softmax step (one rescale of the sums each)

void check_args(const i64* qpos, i64 Tq, i64 Tk, int Hq, int Hkv) {
  GDN_CHECK(Hkv > 0 && Hq % Hkv == 0, "attention: Hq = ", Hq,
            " query heads is not a multiple of Hkv = ", Hkv, " kv heads");
  for (i64 i = 0; i < Tq; ++i)
    GDN_CHECK(qpos[i] >= 0 && qpos[i] < Tk, "attention: qpos[", i, "] = ", qpos[i],
              " is out of range [0, Tk = ", Tk, ")");
}

// Offset of row (b, t, h) of a [B, T, H, D] tensor.
inline i64 at(int b, i64 t, i64 T, int h, int H, int D) {
  return ((i64(b) * T + t) * H + h) * D;
}

// a . b in double. Four partial sums (combined in a fixed order) break the single
// accumulator's dependency chain, so the loop vectorises without -ffast-math.
template <typename X, typename Y>
inline double dot(const X* a, const Y* b, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 += double(a[d]) * double(b[d]);
    s1 += double(a[d + 1]) * double(b[d + 1]);
    s2 += double(a[d + 2]) * double(b[d + 2]);
    s3 += double(a[d + 3]) * double(b[d + 3]);
  }
  for (; d < n; ++d) s0 += double(a[d]) * double(b[d]);
  return (s0 + s1) + (s2 + s3);
}

// out = scale * x in double: q rows are kept pre-scaled, so a score is one dot product.
template <typename T>
inline void load_row(const T* x, int D, double scale, double* out) {
  for (int d = 0; d < D; ++d) out[d] = scale * double(x[d]);
}

}  // namespace

template <typename T>
void attention_forward(Host, const T* q, const T* k, const T* v, const i64* qpos, int B, i64 Tq,
                       i64 Tk, int Hq, int Hkv, int D, double scale, T* o, T* lse) {
  check_args(qpos, Tq, Tk, Hq, Hkv);  // before the parallel region: exceptions cannot leave it
  const int G = Hq / Hkv;
  const i64 blocks = (Tq + kRowBlock - 1) / kRowBlock, units = i64(B) * Hq * blocks;
  constexpr double kNoMax = -std::numeric_limits<double>::infinity();
#pragma omp parallel
  {
    // Per row of the unit: the scaled query, the running max m, sum l and l * output acc.
    std::vector<double> qs(kRowBlock * D), acc(kRowBlock * D), m(kRowBlock), l(kRowBlock);
    std::vector<double> s(kKeyBlock);
    // A unit is up to kRowBlock query rows of one (b, h). A row's key blocks always start
    // at multiples of kKeyBlock, so its sums do not depend on which rows share its unit.
#pragma omp for schedule(dynamic)
    for (i64 u = 0; u < units; ++u) {
      const int b = int(u / (Hq * blocks)), h = int(u / blocks % Hq), kh = h / G;
      const i64 i0 = u % blocks * kRowBlock, nr = std::min(kRowBlock, Tq - i0);
      i64 last = 0;
      for (i64 r = 0; r < nr; ++r) {
        load_row(q + at(b, i0 + r, Tq, h, Hq, D), D, scale, &qs[r * D]);
        std::fill_n(&acc[r * D], D, 0.0);
        m[r] = kNoMax;
        l[r] = 0;
        last = std::max(last, qpos[i0 + r]);
      }
      for (i64 j0 = 0; j0 <= last; j0 += kKeyBlock)
        for (i64 r = 0; r < nr; ++r) {
          const i64 j1 = std::min(j0 + kKeyBlock, qpos[i0 + r] + 1);
          if (j1 <= j0) continue;
          double mb = m[r];
          for (i64 j = j0; j < j1; ++j) {
            s[j - j0] = dot(&qs[r * D], k + at(b, j, Tk, kh, Hkv, D), D);
            mb = std::max(mb, s[j - j0]);
          }
          double* a = &acc[r * D];
          if (mb > m[r]) {  // a new max: rescale what was summed against the old one
            const double c = std::exp(m[r] - mb);
            l[r] *= c;
            for (int d = 0; d < D; ++d) a[d] *= c;
            m[r] = mb;
          }
          for (i64 j = j0; j < j1; ++j) {
            const double p = std::exp(s[j - j0] - m[r]);
            const T* vj = v + at(b, j, Tk, kh, Hkv, D);
            l[r] += p;
            for (int d = 0; d < D; ++d) a[d] += p * double(vj[d]);
          }
        }
      for (i64 r = 0; r < nr; ++r) {
        const i64 row = (i64(b) * Tq + i0 + r) * Hq + h;
        for (int d = 0; d < D; ++d) o[row * D + d] = T(acc[r * D + d] / l[r]);
        lse[row] = T(m[r] + std::log(l[r]));
      }
    }
  }
}

template <typename T>
void attention_backward(Host, const T* q, const T* k, const T* v, const T* o, const T* lse,
                        const T* dout, const i64* qpos, int B, i64 Tq, i64 Tk, int Hq, int Hkv,
                        int D, double scale, T* dq, T* dk, T* dv) {
  // With P = exp(s - lse) and delta_i = dout_i . o_i: dS = P (dout v^T - delta),
  // dq = scale dS k, dk = scale dS^T q, dv = P^T dout. dq sums over keys and dk, dv over
  // queries; two passes, each giving every output one owner, keep both sums in a fixed
  // order while parallel over (b, head, block), at the price of computing P twice. One
  // pass owning a whole (b, kv head) would have only B Hkv units of work.
  check_args(qpos, Tq, Tk, Hq, Hkv);
  const int G = Hq / Hkv;
  std::vector<double> delta(static_cast<std::size_t>(i64(B) * Tq * Hq));
#pragma omp parallel for schedule(static)
  for (i64 r = 0; r < i64(delta.size()); ++r) delta[r] = dot(dout + r * D, o + r * D, D);

  if (dq) {
    // Units as in the forward: up to kRowBlock query rows of one (b, h).
    const i64 blocks = (Tq + kRowBlock - 1) / kRowBlock, units = i64(B) * Hq * blocks;
#pragma omp parallel
    {
      std::vector<double> qs(kRowBlock * D), g(kRowBlock * D), acc(kRowBlock * D);
#pragma omp for schedule(dynamic)
      for (i64 u = 0; u < units; ++u) {
        const int b = int(u / (Hq * blocks)), h = int(u / blocks % Hq), kh = h / G;
        const i64 i0 = u % blocks * kRowBlock, nr = std::min(kRowBlock, Tq - i0);
        i64 last = 0;
        for (i64 r = 0; r < nr; ++r) {
          load_row(q + at(b, i0 + r, Tq, h, Hq, D), D, scale, &qs[r * D]);
          load_row(dout + at(b, i0 + r, Tq, h, Hq, D), D, 1.0, &g[r * D]);
          std::fill_n(&acc[r * D], D, 0.0);
          last = std::max(last, qpos[i0 + r]);
        }
        for (i64 j0 = 0; j0 <= last; j0 += kKeyBlock)
          for (i64 r = 0; r < nr; ++r) {
            const i64 row = (i64(b) * Tq + i0 + r) * Hq + h;
            const double L = double(lse[row]), dl = delta[row];
            const i64 j1 = std::min(j0 + kKeyBlock, qpos[i0 + r] + 1);
            double* a = &acc[r * D];
            for (i64 j = j0; j < j1; ++j) {
              const T *kj = k + at(b, j, Tk, kh, Hkv, D), *vj = v + at(b, j, Tk, kh, Hkv, D);
              const double p = std::exp(dot(&qs[r * D], kj, D) - L);
              const double ds = p * (dot(&g[r * D], vj, D) - dl);
              for (int d = 0; d < D; ++d) a[d] += ds * double(kj[d]);
            }
          }
        for (i64 r = 0; r < nr; ++r)
          for (int d = 0; d < D; ++d)
            dq[at(b, i0 + r, Tq, h, Hq, D) + d] = T(scale * acc[r * D + d]);
      }
    }
  }

  if (!dk && !dv) return;
  // A unit is a block of kKeyBlock keys of one (b, kv head); it sums over the query heads
  // of its group, then the query rows, in order. Keys no query reaches keep zero sums.
  const i64 kblocks = (Tk + kKeyBlock - 1) / kKeyBlock, units = i64(B) * Hkv * kblocks;
#pragma omp parallel
  {
    std::vector<double> qs(D), g(D), ak(kKeyBlock * D), av(kKeyBlock * D);
#pragma omp for schedule(dynamic)
    for (i64 u = 0; u < units; ++u) {
      const int b = int(u / (Hkv * kblocks)), kh = int(u / kblocks % Hkv);
      const i64 j0 = u % kblocks * kKeyBlock, nk = std::min(kKeyBlock, Tk - j0);
      std::fill_n(ak.begin(), nk * D, 0.0);
      std::fill_n(av.begin(), nk * D, 0.0);
      for (int h = kh * G; h < (kh + 1) * G; ++h)
        for (i64 i = 0; i < Tq; ++i) {
          const i64 j1 = std::min(j0 + nk, qpos[i] + 1);
          if (j1 <= j0) continue;
          const i64 row = (i64(b) * Tq + i) * Hq + h;
          load_row(q + row * D, D, scale, qs.data());  // dk = dS^T (scale q)
          load_row(dout + row * D, D, 1.0, g.data());
          const double L = double(lse[row]), dl = delta[row];
          for (i64 j = j0; j < j1; ++j) {
            const T *kj = k + at(b, j, Tk, kh, Hkv, D), *vj = v + at(b, j, Tk, kh, Hkv, D);
            const double p = std::exp(dot(qs.data(), kj, D) - L);
            const double ds = p * (dot(g.data(), vj, D) - dl);
            double *a = &ak[(j - j0) * D], *c = &av[(j - j0) * D];
            for (int d = 0; d < D; ++d) {
              a[d] += ds * qs[d];
              c[d] += p * g[d];
            }
          }
        }
      for (i64 j = 0; j < nk; ++j)
        for (int d = 0; d < D; ++d) {
          const i64 off = at(b, j0 + j, Tk, kh, Hkv, D) + d;
          if (dk) dk[off] = T(ak[j * D + d]);
          if (dv) dv[off] = T(av[j * D + d]);
        }
    }
  }
}

template void attention_forward(Host, const float*, const float*, const float*, const std::int64_t*,
                                int, std::int64_t, std::int64_t, int, int, int, double, float*,
                                float*);
template void attention_forward(Host, const double*, const double*, const double*,
                                const std::int64_t*, int, std::int64_t, std::int64_t, int, int, int,
                                double, double*, double*);
template void attention_backward(Host, const float*, const float*, const float*, const float*,
                                 const float*, const float*, const std::int64_t*, int, std::int64_t,
                                 std::int64_t, int, int, int, double, float*, float*, float*);
template void attention_backward(Host, const double*, const double*, const double*, const double*,
                                 const double*, const double*, const std::int64_t*, int,
                                 std::int64_t, std::int64_t, int, int, int, double, double*,
                                 double*, double*);

}  // namespace gdn::ops
