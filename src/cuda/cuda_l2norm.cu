#include "cuda/cuda_check.h"
#include "cuda/cuda_l2norm.h"
#include "gdn/hd.h"
#include "gdn/l2norm.h"

namespace gdn {

namespace {

constexpr int kThreads = 256;

int grid_for(std::int64_t rows) {
  return int(std::min<std::int64_t>((rows + kThreads - 1) / kThreads, 65535));
}

// l2norm_row / l2norm_row_backward (src/gdn/l2norm.h), a row per thread.
template <typename T>
__global__ void l2norm_kernel(const T* x, std::int64_t rows, int dim, T* y) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::int64_t(gridDim.x) * blockDim.x)
    l2norm_row(x + r * dim, dim, y + r * dim);
}

template <typename T>
__global__ void l2norm_backward_kernel(const T* x, const T* dy, std::int64_t rows, int dim, T* dx) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::int64_t(gridDim.x) * blockDim.x)
    l2norm_row_backward(x + r * dim, dy + r * dim, dim, dx + r * dim);
}

}  // namespace

template <typename T>
CudaQKNormalizer<T>::CudaQKNormalizer(const GdnProblem& p, std::int64_t tokens,
                                      const GdnTensors<T>& in)
    : in_(in), rows_(std::int64_t(p.B) * tokens * p.Hk), dim_(p.K), on_(p.l2norm_qk) {
  view_ = in;
  if (!on_ || rows_ == 0) return;
  qn_.resize(rows_ * dim_);
  kn_.resize(rows_ * dim_);
  l2norm_kernel<T><<<grid_for(rows_), kThreads>>>(in.q, rows_, dim_, qn_.data());
  GDN_CUDA_CHECK(cudaGetLastError());
  l2norm_kernel<T><<<grid_for(rows_), kThreads>>>(in.k, rows_, dim_, kn_.data());
  GDN_CUDA_CHECK(cudaGetLastError());
  view_.q = qn_.data();
  view_.k = kn_.data();
}

template <typename T>
void CudaQKNormalizer<T>::backward(T* dq, T* dk) const {
  if (!on_ || rows_ == 0) return;
  l2norm_backward_kernel<T><<<grid_for(rows_), kThreads>>>(in_.q, dq, rows_, dim_, dq);
  GDN_CUDA_CHECK(cudaGetLastError());
  l2norm_backward_kernel<T><<<grid_for(rows_), kThreads>>>(in_.k, dk, rows_, dim_, dk);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template class CudaQKNormalizer<float>;
template class CudaQKNormalizer<double>;

}  // namespace gdn
