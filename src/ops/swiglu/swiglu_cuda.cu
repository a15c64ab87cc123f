// SwiGLU on the GPU, one element per thread.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "ops/cuda_util.cuh"
#include "ops/swiglu/swiglu.h"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void swiglu_forward_kernel(const T* g, const T* u, i64 n, T* y) {
  for (i64 i = thread_index(); i < n; i += thread_stride()) y[i] = g[i] * sigmoid_t(g[i]) * u[i];
}

template <typename T>
__global__ void swiglu_backward_kernel(const T* g, const T* u, const T* dy, i64 n, T* dg, T* du) {
  for (i64 i = thread_index(); i < n; i += thread_stride()) {
    const T sg = sigmoid_t(g[i]);
    if (dg) dg[i] = dy[i] * u[i] * sg * (T(1) + g[i] * (T(1) - sg));
    if (du) du[i] = dy[i] * g[i] * sg;
  }
}

}  // namespace

template <typename T>
void swiglu_forward(Cuda, const T* g, const T* u, i64 n, T* y) {
  if (n == 0) return;
  swiglu_forward_kernel<T><<<blocks_for(n), kThreads>>>(g, u, n, y);
  check_launch();
}

template <typename T>
void swiglu_backward(Cuda, const T* g, const T* u, const T* dy, i64 n, T* dg, T* du) {
  if (n == 0 || (!dg && !du)) return;
  swiglu_backward_kernel<T><<<blocks_for(n), kThreads>>>(g, u, dy, n, dg, du);
  check_launch();
}

template void swiglu_forward(Cuda, const float*, const float*, std::int64_t, float*);
template void swiglu_forward(Cuda, const double*, const double*, std::int64_t, double*);
template void swiglu_backward(Cuda, const float*, const float*, const float*, std::int64_t, float*,
                              float*);
template void swiglu_backward(Cuda, const double*, const double*, const double*, std::int64_t,
                              double*, double*);

}  // namespace gdn::ops
