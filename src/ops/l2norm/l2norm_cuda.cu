// L2 normalisation on the GPU: a row per thread (the row functions of l2norm.h).
#include "ops/cuda_util.cuh"
#include "ops/l2norm/l2norm.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void l2norm_kernel(const T* x, i64 rows, int dim, T* y) {
  for (i64 r = thread_index(); r < rows; r += thread_stride())
    l2norm_row(x + r * dim, dim, y + r * dim);
}

template <typename T>
__global__ void l2norm_backward_kernel(const T* x, const T* dy, i64 rows, int dim, T* dx) {
  for (i64 r = thread_index(); r < rows; r += thread_stride())
    l2norm_row_backward(x + r * dim, dy + r * dim, dim, dx + r * dim);
}

}  // namespace

template <typename T>
void l2norm_rows(Cuda, const T* x, i64 rows, int dim, T* y) {
  if (rows == 0) return;
  l2norm_kernel<T><<<blocks_for(rows), kThreads>>>(x, rows, dim, y);
  check_launch();
}

template <typename T>
void l2norm_rows_backward(Cuda, const T* x, const T* dy, i64 rows, int dim, T* dx) {
  if (rows == 0) return;
  l2norm_backward_kernel<T><<<blocks_for(rows), kThreads>>>(x, dy, rows, dim, dx);
  check_launch();
}

template void l2norm_rows(Cuda, const float*, std::int64_t, int, float*);
template void l2norm_rows(Cuda, const double*, std::int64_t, int, double*);
template void l2norm_rows_backward(Cuda, const float*, const float*, std::int64_t, int, float*);
template void l2norm_rows_backward(Cuda, const double*, const double*, std::int64_t, int, double*);
}  // namespace gdn::ops
