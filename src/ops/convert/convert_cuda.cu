// The conversions on the GPU: one element per thread, grid-stride (ops/cuda_util.cuh).
#include "ops/convert/convert.h"
#include "ops/cuda_util.cuh"

namespace gdn::ops {

using namespace cuda_util;

namespace {

__global__ void to_float_kernel(const Bf16* x, i64 n, float* y) {
  for (i64 i = thread_index(); i < n; i += thread_stride()) y[i] = gdn::to_float(x[i]);
}

__global__ void to_bf16_kernel(const float* x, i64 n, Bf16* y) {
  for (i64 i = thread_index(); i < n; i += thread_stride()) y[i] = gdn::to_bf16(x[i]);
}

template <typename T>
__global__ void round_to_bf16_kernel(T* x, i64 n) {
  for (i64 i = thread_index(); i < n; i += thread_stride()) x[i] = T(gdn::round_bf16(x[i]));
}

}  // namespace

void to_float(Cuda, const Bf16* x, i64 n, float* y) {
  if (n == 0) return;
  to_float_kernel<<<blocks_for(n), kThreads>>>(x, n, y);
  check_launch();
}

void to_bf16(Cuda, const float* x, i64 n, Bf16* y) {
  if (n == 0) return;
  to_bf16_kernel<<<blocks_for(n), kThreads>>>(x, n, y);
  check_launch();
}

template <typename T>
void round_to_bf16(Cuda, T* x, i64 n) {
  if (n == 0) return;
  round_to_bf16_kernel<<<blocks_for(n), kThreads>>>(x, n);
  check_launch();
}

template void round_to_bf16(Cuda, float*, i64);
template void round_to_bf16(Cuda, double*, i64);

}  // namespace gdn::ops
