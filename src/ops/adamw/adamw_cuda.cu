// AdamW and the gradient-norm pieces on the GPU.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "ops/adamw/adamw.h"
#include "ops/cuda_util.cuh"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void adamw_kernel(T* p, const T* g, T* m, T* v, i64 n, double lr, double b1, double b2,
                             double eps, double keep, double bc1, double bc2, double gscale) {
  for (i64 e = thread_index(); e < n; e += thread_stride()) {
    // In T, with the constants rounded once to T: the host's order of operations.
    const T gd = gscale == 1.0 ? g[e] : T(double(g[e]) * gscale);
    const T me = T(b1) * m[e] + T(1.0 - b1) * gd;
    const T ve = T(b2) * v[e] + T(1.0 - b2) * gd * gd;
    m[e] = me;
    v[e] = ve;
    const T update = (me / T(bc1)) / (sqrt(ve / T(bc2)) + T(eps));
    p[e] = p[e] * T(keep) - T(lr) * update;
  }
}

// Per block: sum of squares over a grid-stride slice (the grid size depends on n only).
template <typename T>
__global__ void sum_squares_partial_kernel(const T* g, i64 n, double* part) {
  __shared__ double red[kThreads];
  double s = 0;
  for (i64 e = thread_index(); e < n; e += thread_stride()) s += double(g[e]) * double(g[e]);
  s = block_reduce(s, red, SumOp{});
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(const double* part, int count, double* out) {
  __shared__ double red[kThreads];
  double s = 0;
  for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) s += part[i];
  s = block_reduce(s, red, SumOp{});
  if (threadIdx.x == 0) *out = s;
}

template <typename T>
__global__ void scale_kernel(T* g, i64 n, double s) {
  for (i64 e = thread_index(); e < n; e += thread_stride()) g[e] = T(double(g[e]) * s);
}

}  // namespace

template <typename T>
void adamw_update(Cuda, T* p, const T* g, T* m, T* v, i64 n, double lr, double beta1, double beta2,
                  double eps, double wd, i64 step, double grad_scale) {
  if (n == 0) return;
  // As AdamW<T>::step: bias corrections on the host with std::pow, keep = 1 - lr * wd.
  const double bc1 = 1.0 - std::pow(beta1, double(step + 1));
  const double bc2 = 1.0 - std::pow(beta2, double(step + 1));
  const double keep = 1.0 - lr * wd;
  adamw_kernel<T><<<blocks_for(n), kThreads>>>(p, g, m, v, n, lr, beta1, beta2, eps, keep, bc1, bc2,
                                               grad_scale);
  check_launch();
}

template <typename T>
double sum_squares(Cuda, const T* g, i64 n) {
  if (n == 0) return 0.0;
  const int blocks = int(std::min<i64>((n + kThreads - 1) / kThreads, kSumBlocks));
  Scratch<double> part{std::size_t(blocks) + 1};
  sum_squares_partial_kernel<T><<<blocks, kThreads>>>(g, n, part.get());
  check_launch();
  sum_partials_kernel<<<1, kThreads>>>(part.get(), blocks, part.get() + blocks);
  check_launch();
  double s = 0;
  GDN_CUDA_CHECK(cudaMemcpy(&s, part.get() + blocks, sizeof(double), cudaMemcpyDeviceToHost));
  return s;
}

template <typename T>
void scale(Cuda, T* g, i64 n, double s) {
  if (n == 0) return;
  scale_kernel<T><<<blocks_for(n), kThreads>>>(g, n, s);
  check_launch();
}

template void adamw_update(Cuda, float*, const float*, float*, float*, std::int64_t, double, double,
                           double, double, double, std::int64_t, double);
template void adamw_update(Cuda, double*, const double*, double*, double*, std::int64_t, double,
                           double, double, double, double, std::int64_t, double);
template double sum_squares(Cuda, const float* g, std::int64_t n);
template double sum_squares(Cuda, const double* g, std::int64_t n);
template void scale(Cuda, float*, std::int64_t, double);
template void scale(Cuda, double*, std::int64_t, double);

}  // namespace gdn::ops
