// The MoE router and row movement on the GPU. The router runs one thread per token row,
// summing over the experts in the host's order; the row moves and scalings one element
// per thread; the per-row dot products one warp per row (cuda_util's butterfly sum). Rows
// of scatter_add_rows are distinct, so no two threads add to one element: no atomics.
#include <cstdint>

#include "ops/cuda_util.cuh"
#include "ops/moe/moe.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

// a comes before b in the top-k order: more probable, or as probable with a lower index
// (the host's partial_sort comparator, a strict total order).
template <typename T>
__device__ bool ranks_before(const T* p, int a, int b) {
  return p[a] > p[b] || (p[a] == p[b] && a < b);
}

template <typename T>
__global__ void router_forward_kernel(const T* logits, i64 N, int E, int k, bool renorm, T* probs,
                                      std::int32_t* idx, T* weights) {
  for (i64 n = thread_index(); n < N; n += thread_stride()) {
    const T* l = logits + n * E;
    T* p = probs + n * E;
    double mx = l[0], sum = 0;
    for (int e = 1; e < E; ++e) mx = ::fmax(mx, double(l[e]));
    for (int e = 0; e < E; ++e) sum += ::exp(double(l[e]) - mx);
    for (int e = 0; e < E; ++e) p[e] = T(::exp(double(l[e]) - mx) / sum);
    // Selection sort of the first k: pick j is the first expert, in the top-k order, of
    // those not picked yet. The order is total, so this is the host's partial_sort prefix;
    // with NaN probabilities (a diverged step) the picks stay distinct and in range.
    std::int32_t* id = idx + n * k;
    double top = 0;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < E; ++e) {
        bool taken = false;
        for (int i = 0; i < j; ++i) taken = taken || id[i] == e;
        if (!taken && (best < 0 || ranks_before(p, e, best))) best = e;
      }
      id[j] = best;
      top += double(p[best]);
    }
    for (int j = 0; j < k; ++j) weights[n * k + j] = renorm ? T(double(p[id[j]]) / top) : p[id[j]];
  }
}

template <typename T>
__global__ void router_backward_kernel(const T* probs, const std::int32_t* idx, const T* dweights,
                                       i64 N, int E, int k, bool renorm, const double* dprob_all,
                                       T* dlogits) {
  for (i64 n = thread_index(); n < N; n += thread_stride()) {
    const T* p = probs + n * E;
    const std::int32_t* id = idx + n * k;
    const T* dw = dweights + n * k;
    double S = 0, dot = 0;
    if (renorm) {
      for (int j = 0; j < k; ++j) S += double(p[id[j]]);
      for (int j = 0; j < k; ++j) dot += double(dw[j]) * double(p[id[j]]) / S;
    }
    // dp[e]: the load-balancing term plus the one selected slot that names e (the k
    // experts are distinct), the host's dp array recomputed where it is read.
    auto dp = [&](int e) {
      double v = dprob_all ? dprob_all[e] : 0.0;
      for (int j = 0; j < k; ++j)
        if (id[j] == e) v += renorm ? (double(dw[j]) - dot) / S : double(dw[j]);
      return v;
    };
    // Softmax: dl_e = p_e (dp_e - sum_f p_f dp_f).
    double s = 0;
    for (int e = 0; e < E; ++e) s += double(p[e]) * dp(e);
    for (int e = 0; e < E; ++e) dlogits[n * E + e] = T(double(p[e]) * (dp(e) - s));
  }
}

template <typename T>
__global__ void gather_rows_kernel(const T* src, const i64* rows, i64 n, int d, T* dst) {
  for (i64 e = thread_index(); e < n * d; e += thread_stride())
    dst[e] = src[rows[e / d] * d + e % d];
}

template <typename T>
__global__ void scatter_add_rows_kernel(const T* src, const i64* rows, const T* scale, i64 n, int d,
                                        T* dst) {
  for (i64 e = thread_index(); e < n * d; e += thread_stride()) {
    const i64 i = e / d;
    const T s = scale ? scale[i] : T(1);
    dst[rows[i] * d + e % d] += s * src[e];
  }
}

template <typename T>
__global__ void row_dots_kernel(const T* a, const T* b, i64 n, int d, T* out) {
  GDN_FOR_EACH_WARP_ROW(i, lane, n) {
    const double acc = warp_row_dot(a + i * d, b + i * d, d, lane);
    if (lane == 0) out[i] = T(acc);
  }
}

// y may be x: each element is read and written by one thread.
template <typename T>
__global__ void scale_rows_kernel(const T* x, const T* s, i64 n, int d, T* y) {
  for (i64 e = thread_index(); e < n * d; e += thread_stride()) y[e] = s[e / d] * x[e];
}

template <typename T>
__global__ void shared_gate_forward_kernel(const T* s, const T* z, i64 N, int d, T* y) {
  for (i64 e = thread_index(); e < N * d; e += thread_stride()) y[e] += sigmoid_t(z[e / d]) * s[e];
}

template <typename T>
__global__ void shared_gate_backward_kernel(const T* s, const T* z, const T* dy, i64 N, int d,
                                            T* ds, T* dz) {
  GDN_FOR_EACH_WARP_ROW(n, lane, N) {
    const T g = sigmoid_t(z[n]);
    double dot = 0;
    for (int c = lane; c < d; c += kWarp) {
      dot += double(dy[n * d + c]) * double(s[n * d + c]);
      ds[n * d + c] = g * dy[n * d + c];
    }
    dot = warp_sum(dot);
    if (lane == 0) dz[n] = T(dot * double(g) * (1.0 - double(g)));
  }
}

}  // namespace

template <typename T>
void router_forward(Cuda, const T* logits, i64 N, int E, int k, bool renorm, T* probs,
                    std::int32_t* idx, T* weights) {
  GDN_CHECK(E > 0 && k >= 1 && k <= E, "router: top-", k, " of ", E, " experts");
  if (N == 0) return;
  router_forward_kernel<T>
      <<<blocks_for(N), kThreads>>>(logits, N, E, k, renorm, probs, idx, weights);
  check_launch();
}

template <typename T>
void router_backward(Cuda, const T* probs, const std::int32_t* idx, const T* dweights, i64 N, int E,
                     int k, bool renorm, const double* dprob_all, T* dlogits) {
  if (N == 0) return;
  router_backward_kernel<T>
      <<<blocks_for(N), kThreads>>>(probs, idx, dweights, N, E, k, renorm, dprob_all, dlogits);
  check_launch();
}

template <typename T>
void gather_rows(Cuda, const T* src, const i64* rows, i64 n, int d, T* dst) {
  if (n * d == 0) return;
  gather_rows_kernel<T><<<blocks_for(n * d), kThreads>>>(src, rows, n, d, dst);
  check_launch();
}

template <typename T>
void scatter_add_rows(Cuda, const T* src, const i64* rows, const T* scale, i64 n, int d, T* dst) {
  if (n * d == 0) return;
  scatter_add_rows_kernel<T><<<blocks_for(n * d), kThreads>>>(src, rows, scale, n, d, dst);
  check_launch();
}

template <typename T>
void row_dots(Cuda, const T* a, const T* b, i64 n, int d, T* out) {
  if (n == 0) return;
  row_dots_kernel<T><<<row_blocks(n), kThreads>>>(a, b, n, d, out);
  check_launch();
}

template <typename T>
void scale_rows(Cuda, const T* x, const T* s, i64 n, int d, T* y) {
  if (n * d == 0) return;
  scale_rows_kernel<T><<<blocks_for(n * d), kThreads>>>(x, s, n, d, y);
  check_launch();
}

template <typename T>
void shared_gate_forward(Cuda, const T* s, const T* z, i64 N, int d, T* y) {
  if (N * d == 0) return;
  shared_gate_forward_kernel<T><<<blocks_for(N * d), kThreads>>>(s, z, N, d, y);
  check_launch();
}

template <typename T>
void shared_gate_backward(Cuda, const T* s, const T* z, const T* dy, i64 N, int d, T* ds, T* dz) {
  if (N == 0) return;
  shared_gate_backward_kernel<T><<<row_blocks(N), kThreads>>>(s, z, dy, N, d, ds, dz);
  check_launch();
}

template void router_forward(Cuda, const float*, std::int64_t, int, int, bool, float*,
                             std::int32_t*, float*);
template void router_forward(Cuda, const double*, std::int64_t, int, int, bool, double*,
                             std::int32_t*, double*);
template void router_backward(Cuda, const float*, const std::int32_t*, const float*, std::int64_t,
                              int, int, bool, const double*, float*);
template void router_backward(Cuda, const double*, const std::int32_t*, const double*, std::int64_t,
                              int, int, bool, const double*, double*);
template void gather_rows(Cuda, const float*, const std::int64_t*, std::int64_t, int, float*);
template void gather_rows(Cuda, const double*, const std::int64_t*, std::int64_t, int, double*);
template void scatter_add_rows(Cuda, const float*, const std::int64_t*, const float*, std::int64_t,
                               int, float*);
template void scatter_add_rows(Cuda, const double*, const std::int64_t*, const double*,
                               std::int64_t, int, double*);
template void row_dots(Cuda, const float*, const float*, std::int64_t, int, float*);
template void row_dots(Cuda, const double*, const double*, std::int64_t, int, double*);
template void scale_rows(Cuda, const float*, const float*, std::int64_t, int, float*);
template void scale_rows(Cuda, const double*, const double*, std::int64_t, int, double*);
template void shared_gate_forward(Cuda, const float*, const float*, std::int64_t, int, float*);
template void shared_gate_forward(Cuda, const double*, const double*, std::int64_t, int, double*);
template void shared_gate_backward(Cuda, const float*, const float*, const float*, std::int64_t,
                                   int, float*, float*);
template void shared_gate_backward(Cuda, const double*, const double*, const double*, std::int64_t,
                                   int, double*, double*);

}  // namespace gdn::ops
