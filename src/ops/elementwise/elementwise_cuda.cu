// Element-wise ops on the GPU, one element per thread.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "ops/cuda_util.cuh"
#include "ops/elementwise/elementwise.h"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void add_kernel(T* y, const T* a, const T* b, i64 n) {
  for (i64 i = thread_index(); i < n; i += thread_stride()) y[i] = a[i] + b[i];
}

template <typename T>
__global__ void sigmoid_gate_forward_kernel(const T* x, const T* g, i64 n, T* y) {
  for (i64 i = thread_index(); i < n; i += thread_stride())
    y[i] = x[i] * (T(1) / (T(1) + exp(-g[i])));
}

template <typename T>
__global__ void sigmoid_gate_backward_kernel(const T* x, const T* g, const T* dy, i64 n, T* dx,
                                             T* dg) {
  for (i64 i = thread_index(); i < n; i += thread_stride()) {
    const T s = T(1) / (T(1) + exp(-g[i]));
    if (dx) dx[i] = dy[i] * s;
    if (dg) dg[i] = dy[i] * x[i] * s * (T(1) - s);
  }
}

}  // namespace

template <typename T>
void sigmoid_gate_forward(Cuda, const T* x, const T* g, i64 n, T* y) {
  if (n == 0) return;
  sigmoid_gate_forward_kernel<T><<<blocks_for(n), kThreads>>>(x, g, n, y);
  check_launch();
}

template <typename T>
void sigmoid_gate_backward(Cuda, const T* x, const T* g, const T* dy, i64 n, T* dx, T* dg) {
  if (n == 0) return;
  sigmoid_gate_backward_kernel<T><<<blocks_for(n), kThreads>>>(x, g, dy, n, dx, dg);
  check_launch();
}

template <typename T>
void add(Cuda, T* y, const T* a, const T* b, i64 n) {
  if (n == 0) return;
  add_kernel<T><<<blocks_for(n), kThreads>>>(y, a, b, n);
  check_launch();
}

template void add(Cuda, float*, const float*, const float*, std::int64_t);
template void add(Cuda, double*, const double*, const double*, std::int64_t);
template void sigmoid_gate_forward(Cuda, const float*, const float*, std::int64_t, float*);
template void sigmoid_gate_forward(Cuda, const double*, const double*, std::int64_t, double*);
template void sigmoid_gate_backward(Cuda, const float*, const float*, const float*, std::int64_t,
                                    float*, float*);
template void sigmoid_gate_backward(Cuda, const double*, const double*, const double*, std::int64_t,
                                    double*, double*);

}  // namespace gdn::ops
