// Attention on the GPU, written for clarity: one block per output row, nothing of size
// [Tq, Tk] stored. The forward takes two passes over a row's keys (the max of the scores,
// then the exponentials' sum and the weighted values against that max), so there is no
// rescaling; the keys go in tiles of one key per thread. Every sum has a fixed order: a
// thread's own terms in order, then cuda_util's block tree, or, for a vector sum over a
// tile (the output, dq, dk, dv), one thread per column adding the tile's terms in order.
// No atomics, so the bits depend on the shapes only. The backward, as the host's: delta
// per query row; dq by one block per query row; dk, dv by one block per key row, summing
// over the query heads of its group, then the query rows, in order.
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ops/attention/attention.h"
#include "ops/attention/cudnn_attention.h"
#include "ops/attention/flash_attention.h"
#include "ops/cuda_util.cuh"

namespace gdn::ops {

using namespace cuda_util;

namespace {

constexpr int kAttnThreads = 128;  // threads per block, and keys (or queries) per tile

// The heads only: qpos and kstart are the caller's to check where it makes them
// (check_attention_positions), as a check here would copy them to the host every call.
void check_args(int Hq, int Hkv) {
  GDN_CHECK(Hkv > 0 && Hq % Hkv == 0, "attention: Hq = ", Hq,
            " query heads is not a multiple of Hkv = ", Hkv, " kv heads");
}

// The first key query row i of batch row b sees (0 without documents).
__device__ inline i64 first_key(const i64* kstart, i64 b, i64 Tq, i64 i) {
  return kstart ? kstart[b * Tq + i] : 0;
}

// a . b in double, in order.
template <typename Y>
__device__ double dot(const double* a, const Y* b, int n) {
  double s = 0;
  for (int d = 0; d < n; ++d) s += a[d] * double(b[d]);
  return s;
}

// Offset of row (b, t, h) of a [B, T, H, D] tensor.
__device__ inline i64 at(i64 b, i64 t, i64 T, i64 h, int H, int D) {
  return ((b * T + t) * H + h) * D;
}

// Unit u = (b, i, h) of the query rows [B, Tq, Hq], as the row index (b Tq + i) Hq + h.
// Shared memory: qs [D] (the scaled query), acc [D], p [kAttnThreads], red [kAttnThreads].
template <typename T>
__global__ void attention_forward_kernel(const T* q, const T* k, const T* v, const i64* qpos,
                                         const i64* kstart, int B, i64 Tq, i64 Tk, int Hq, int Hkv,
                                         int D, double scale, T* o, T* lse) {
  extern __shared__ double sh[];
  double *qs = sh, *acc = sh + D, *p = acc + D, *red = p + kAttnThreads;
  const int G = Hq / Hkv, tid = int(threadIdx.x);
  for (i64 row = blockIdx.x; row < i64(B) * Tq * Hq; row += gridDim.x) {
    const i64 b = row / (Tq * Hq), i = row / Hq % Tq, kh = (row % Hq) / G;
    const i64 nk = qpos[i] + 1, j_lo = first_key(kstart, b, Tq, i);  // keys j_lo..qpos[i]
    for (int d = tid; d < D; d += kAttnThreads) {
      qs[d] = scale * double(q[row * D + d]);
      acc[d] = 0;
    }
    __syncthreads();
    // Pass 1: the largest score.
    double m = -INFINITY;
    for (i64 j = j_lo + tid; j < nk; j += kAttnThreads)
      m = ::fmax(m, dot(qs, k + at(b, j, Tk, kh, Hkv, D), D));
    m = block_reduce(m, red, MaxOp{});
    // Pass 2: l = sum_j exp(s_j - m), acc = sum_j exp(s_j - m) v_j, a tile at a time.
    double l = 0;
    for (i64 j0 = j_lo; j0 < nk; j0 += kAttnThreads) {
      const i64 j = j0 + tid;
      const double pj = j < nk ? ::exp(dot(qs, k + at(b, j, Tk, kh, Hkv, D), D) - m) : 0.0;
      p[tid] = pj;
      l += pj;
      __syncthreads();
      const i64 n = nk - j0 < kAttnThreads ? nk - j0 : kAttnThreads;
      for (int d = tid; d < D; d += kAttnThreads)
        for (i64 t = 0; t < n; ++t) acc[d] += p[t] * double(v[at(b, j0 + t, Tk, kh, Hkv, D) + d]);
      __syncthreads();  // p is rewritten by the next tile
    }
    l = block_reduce(l, red, SumOp{});
    for (int d = tid; d < D; d += kAttnThreads) o[row * D + d] = T(acc[d] / l);
    if (tid == 0) lse[row] = T(m + ::log(l));
    __syncthreads();  // qs and acc are rewritten by the next row
  }
}

// delta[r] = dout_r . o_r, one warp per row.
template <typename T>
__global__ void attention_delta_kernel(const T* dout, const T* o, i64 rows, int D, double* delta) {
  GDN_FOR_EACH_WARP_ROW(r, lane, rows) {
    const double s = warp_row_dot(dout + r * D, o + r * D, D, lane);
    if (lane == 0) delta[r] = s;
  }
}

// dq of query row (b, i, h) = scale sum_j dS_j k_j, dS_j = P_j (dout . v_j - delta).
// Shared memory: qs [D], g [D] (dout), acc [D], ds [kAttnThreads].
template <typename T>
__global__ void attention_dq_kernel(const T* q, const T* k, const T* v, const T* lse, const T* dout,
                                    const double* delta, const i64* qpos, const i64* kstart, int B,
                                    i64 Tq, i64 Tk, int Hq, int Hkv, int D, double scale, T* dq) {
  extern __shared__ double sh[];
  double *qs = sh, *g = sh + D, *acc = g + D, *ds = acc + D;
  const int G = Hq / Hkv, tid = int(threadIdx.x);
  for (i64 row = blockIdx.x; row < i64(B) * Tq * Hq; row += gridDim.x) {
    const i64 b = row / (Tq * Hq), i = row / Hq % Tq, kh = (row % Hq) / G;
    const i64 nk = qpos[i] + 1, j_lo = first_key(kstart, b, Tq, i);
    const double L = double(lse[row]), dl = delta[row];
    for (int d = tid; d < D; d += kAttnThreads) {
      qs[d] = scale * double(q[row * D + d]);
      g[d] = double(dout[row * D + d]);
      acc[d] = 0;
    }
    __syncthreads();
    for (i64 j0 = j_lo; j0 < nk; j0 += kAttnThreads) {
      const i64 j = j0 + tid;
      double dsj = 0;
      if (j < nk) {
        const i64 kj = at(b, j, Tk, kh, Hkv, D);
        const double pj = ::exp(dot(qs, k + kj, D) - L);
        dsj = pj * (dot(g, v + kj, D) - dl);
      }
      ds[tid] = dsj;
      __syncthreads();
      const i64 n = nk - j0 < kAttnThreads ? nk - j0 : kAttnThreads;
      for (int d = tid; d < D; d += kAttnThreads)
        for (i64 t = 0; t < n; ++t) acc[d] += ds[t] * double(k[at(b, j0 + t, Tk, kh, Hkv, D) + d]);
      __syncthreads();
    }
    for (int d = tid; d < D; d += kAttnThreads) dq[row * D + d] = T(scale * acc[d]);
    __syncthreads();
  }
}

// dk, dv of key row (b, j, kh): dk = sum dS (scale q), dv = sum P dout over the query
// items (h in kh's group, then i in order) with kstart <= j <= qpos[i]; a tile of items at
// a time.
// Shared memory: ak [D], av [D], p [kAttnThreads], ds [kAttnThreads], and the tile's
// query rows (kAttnThreads i64 in the same 8-byte slots; -1: the item does not reach j).
template <typename T>
__global__ void attention_dkv_kernel(const T* q, const T* k, const T* v, const T* lse,
                                     const T* dout, const double* delta, const i64* qpos,
                                     const i64* kstart, int B, i64 Tq, i64 Tk, int Hq, int Hkv,
                                     int D, double scale, T* dk, T* dv) {
  extern __shared__ double sh[];
  double *ak = sh, *av = sh + D, *p = av + D, *ds = p + kAttnThreads;
  i64* qrow = reinterpret_cast<i64*>(ds + kAttnThreads);
  const int G = Hq / Hkv, tid = int(threadIdx.x);
  const i64 items = i64(G) * Tq;
  for (i64 key = blockIdx.x; key < i64(B) * Tk * Hkv; key += gridDim.x) {
    const i64 b = key / (Tk * Hkv), j = key / Hkv % Tk, kh = key % Hkv;
    const T *kj = k + key * D, *vj = v + key * D;
    for (int d = tid; d < D; d += kAttnThreads) ak[d] = av[d] = 0;
    __syncthreads();
    for (i64 u0 = 0; u0 < items; u0 += kAttnThreads) {
      const i64 u = u0 + tid;
      double pu = 0, dsu = 0;
      i64 r = -1;
      if (u < items) {
        const i64 h = kh * G + u / Tq, i = u % Tq;
        if (qpos[i] >= j && first_key(kstart, b, Tq, i) <= j) {
          const i64 row = (b * Tq + i) * Hq + h;
          double s = 0, gv = 0;
          for (int d = 0; d < D; ++d) {
            s += scale * double(q[row * D + d]) * double(kj[d]);
            gv += double(dout[row * D + d]) * double(vj[d]);
          }
          pu = ::exp(s - double(lse[row]));
          dsu = pu * (gv - delta[row]);
          r = row;
        }
      }
      p[tid] = pu;
      ds[tid] = dsu;
      qrow[tid] = r;
      __syncthreads();
      const i64 n = items - u0 < kAttnThreads ? items - u0 : kAttnThreads;
      for (int d = tid; d < D; d += kAttnThreads)
        for (i64 t = 0; t < n; ++t) {
          const i64 row = qrow[t];
          if (row < 0) continue;
          ak[d] += ds[t] * (scale * double(q[row * D + d]));
          av[d] += p[t] * double(dout[row * D + d]);
        }
      __syncthreads();
    }
    for (int d = tid; d < D; d += kAttnThreads) {
      if (dk) dk[key * D + d] = T(ak[d]);
      if (dv) dv[key * D + d] = T(av[d]);
    }
    __syncthreads();
  }
}

inline int row_grid(i64 rows) {
  return int(rows < kMaxBlocks ? rows : kMaxBlocks);
}

#if GDN_HAVE_CUDNN
// Whether the float op tries cuDNN first (attention_kernel, attention.h).
bool cudnn_attention_chosen(Precision p, int D) {
  return attention_kernel(attention_backend(), p, D, cudnn_attention_built()) ==
         AttentionKernel::cudnn;
}
#endif

}  // namespace

template <typename T>
void attention_forward(Cuda, Precision p, const T* q, const T* k, const T* v, const i64* qpos,
                       int B, i64 Tq, i64 Tk, int Hq, int Hkv, int D, double scale, T* o, T* lse,
                       const i64* kstart) {
  check_args(Hq, Hkv);
#if GDN_HAVE_CUDNN
  if constexpr (std::is_same_v<T, float>)
    if (cudnn_attention_chosen(p, D) &&
        cudnn_attention_forward(q, k, v, qpos, B, Tq, Tk, Hq, Hkv, D, scale, o, lse, kstart))
      return;
#endif
  if constexpr (std::is_same_v<T, float>)
    if (flash_attention_chosen(D, p))
      return flash_attention_forward(Cuda{}, q, k, v, qpos, B, Tq, Tk, Hq, Hkv, D, scale, o, lse,
                                     kstart);
  const i64 rows = i64(B) * Tq * Hq;
  if (rows == 0) return;
  const std::size_t shared = (2 * std::size_t(D) + 2 * kAttnThreads) * sizeof(double);
  attention_forward_kernel<T><<<row_grid(rows), kAttnThreads, shared>>>(
      q, k, v, qpos, kstart, B, Tq, Tk, Hq, Hkv, D, scale, o, lse);
  check_launch();
}

template <typename T>
void attention_backward(Cuda, Precision p, const T* q, const T* k, const T* v, const T* o,
                        const T* lse, const T* dout, const i64* qpos, int B, i64 Tq, i64 Tk, int Hq,
                        int Hkv, int D, double scale, T* dq, T* dk, T* dv, const i64* kstart) {
  check_args(Hq, Hkv);
#if GDN_HAVE_CUDNN
  if constexpr (std::is_same_v<T, float>)
    if (cudnn_attention_chosen(p, D) &&
        cudnn_attention_backward(q, k, v, o, lse, dout, qpos, B, Tq, Tk, Hq, Hkv, D, scale, dq, dk,
                                 dv, kstart))
      return;
#endif
  if constexpr (std::is_same_v<T, float>)
    if (flash_attention_chosen(D, p))
      return flash_attention_backward(Cuda{}, q, k, v, o, lse, dout, qpos, B, Tq, Tk, Hq, Hkv, D,
                                      scale, dq, dk, dv, kstart);
  const i64 rows = i64(B) * Tq * Hq, keys = i64(B) * Tk * Hkv;
  Scratch<double> delta{std::size_t(rows)};
  if (rows > 0) {
    attention_delta_kernel<T><<<row_blocks(rows), kThreads>>>(dout, o, rows, D, delta.get());
    check_launch();
  }
  if (dq && rows > 0) {
    const std::size_t shared = (3 * std::size_t(D) + kAttnThreads) * sizeof(double);
    attention_dq_kernel<T><<<row_grid(rows), kAttnThreads, shared>>>(
        q, k, v, lse, dout, delta.get(), qpos, kstart, B, Tq, Tk, Hq, Hkv, D, scale, dq);
    check_launch();
  }
  if ((dk || dv) && keys > 0) {
    const std::size_t shared = (2 * std::size_t(D) + 3 * kAttnThreads) * sizeof(double);
    attention_dkv_kernel<T><<<row_grid(keys), kAttnThreads, shared>>>(
        q, k, v, lse, dout, delta.get(), qpos, kstart, B, Tq, Tk, Hq, Hkv, D, scale, dk, dv);
    check_launch();
  }
}

template void attention_forward(Cuda, Precision, const float*, const float*, const float*,
                                const std::int64_t*, int, std::int64_t, std::int64_t, int, int, int,
                                double, float*, float*, const std::int64_t*);
template void attention_forward(Cuda, Precision, const double*, const double*, const double*,
                                const std::int64_t*, int, std::int64_t, std::int64_t, int, int, int,
                                double, double*, double*, const std::int64_t*);
template void attention_backward(Cuda, Precision, const float*, const float*, const float*,
                                 const float*, const float*, const float*, const std::int64_t*, int,
                                 std::int64_t, std::int64_t, int, int, int, double, float*, float*,
                                 float*, const std::int64_t*);
template void attention_backward(Cuda, Precision, const double*, const double*, const double*,
                                 const double*, const double*, const double*, const std::int64_t*,
                                 int, std::int64_t, std::int64_t, int, int, int, double, double*,
                                 double*, double*, const std::int64_t*);

}  // namespace gdn::ops
