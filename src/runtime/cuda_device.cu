#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535;

int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return int(b < kMaxBlocks ? b : kMaxBlocks);
}

template <typename T>
__global__ void fill_kernel(T* p, std::int64_t n, T value) {
  for (std::int64_t x = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; x < n;
       x += std::int64_t(gridDim.x) * blockDim.x)
    p[x] = value;
}

template <typename T>
__global__ void copy_rows_kernel(T* dst, std::int64_t dst_stride, const T* src,
                                 std::int64_t src_stride, std::int64_t len, std::int64_t rows) {
  for (std::int64_t x = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; x < len * rows;
       x += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = x / len, c = x % len;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  }
}

}  // namespace

namespace cuda_detail {
void copy_bytes(void* dst, const void* src, std::size_t bytes, Copy kind) {
  if (bytes == 0) return;
  const cudaMemcpyKind k = kind == Copy::to_device ? cudaMemcpyHostToDevice
                           : kind == Copy::to_host ? cudaMemcpyDeviceToHost
                                                   : cudaMemcpyDeviceToDevice;
  GDN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, k));
}
}  // namespace cuda_detail

template <typename T>
void Cuda::fill(T* dst, std::size_t n, T value) {
  if (n == 0) return;
  fill_kernel<T><<<blocks_for(std::int64_t(n)), kThreads>>>(dst, std::int64_t(n), value);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void Cuda::copy_rows(T* dst, std::int64_t dst_stride, const T* src, std::int64_t src_stride,
                     std::int64_t len, std::int64_t rows) {
  if (len <= 0 || rows <= 0) return;
  copy_rows_kernel<T>
      <<<blocks_for(len * rows), kThreads>>>(dst, dst_stride, src, src_stride, len, rows);
  GDN_CUDA_CHECK(cudaGetLastError());
}

void Cuda::synchronize() {
  GDN_CUDA_CHECK(cudaDeviceSynchronize());
}

void Cuda::memory_info(std::size_t* free_bytes, std::size_t* total_bytes) {
  GDN_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

std::int64_t Cuda::peak_bytes() {
  return std::int64_t(cuda_detail::pool_used_peak_bytes());
}

#define GDN_CUDA_DEVICE_INSTANTIATE(T)                                                     \
  template void Cuda::fill<T>(T*, std::size_t, T);                                         \
  template void Cuda::copy_rows<T>(T*, std::int64_t, const T*, std::int64_t, std::int64_t, \
                                   std::int64_t);
GDN_CUDA_DEVICE_INSTANTIATE(float)
GDN_CUDA_DEVICE_INSTANTIATE(double)
GDN_CUDA_DEVICE_INSTANTIATE(std::int32_t)
GDN_CUDA_DEVICE_INSTANTIATE(std::int64_t)
#undef GDN_CUDA_DEVICE_INSTANTIATE

}  // namespace gdn
