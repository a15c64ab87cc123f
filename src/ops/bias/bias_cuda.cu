// Linear-layer biases on the GPU: one element per thread; db by the deterministic column
// sums (cuda_util.cuh), added once per column as the host does.
#include <cstdint>

#include "ops/bias/bias.h"
#include "ops/cuda_util.cuh"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void bias_add_kernel(T* y, const T* b, i64 N, int out) {
  for (i64 i = thread_index(); i < N * out; i += thread_stride()) y[i] += b[i % out];
}

template <typename T>
struct BiasDb {
  const T* dy;
  int out;
  T* db;
  __device__ double operator()(i64 i, int c) const { return double(dy[i * out + c]); }
  __device__ void add(int c, double s) const { db[c] += T(s); }
};

}  // namespace

template <typename T>
void bias_add(Cuda, T* y, const T* b, i64 N, int out) {
  if (N * out == 0) return;
  bias_add_kernel<T><<<blocks_for(N * out), kThreads>>>(y, b, N, out);
  check_launch();
}

template <typename T>
void bias_backward(Cuda, const T* dy, i64 N, int out, T* db) {
  column_sums(BiasDb<T>{dy, out, db}, N, out);
}

template void bias_add(Cuda, float*, const float*, std::int64_t, int);
template void bias_add(Cuda, double*, const double*, std::int64_t, int);
template void bias_backward(Cuda, const float*, std::int64_t, int, float*);
template void bias_backward(Cuda, const double*, std::int64_t, int, double*);

}  // namespace gdn::ops
