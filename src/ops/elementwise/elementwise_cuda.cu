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

}  // namespace

template <typename T>
void add(Cuda, T* y, const T* a, const T* b, i64 n) {
  if (n == 0) return;
  add_kernel<T><<<blocks_for(n), kThreads>>>(y, a, b, n);
  check_launch();
}

GDN_INSTANTIATE_ON(GDN_ELEMENTWISE_OPS, Cuda)

}  // namespace gdn::ops
