// The Cuda device policy (see core/device.h): this process's GPU, chosen at start-up by
// device_select.h. Buffers are DeviceBuffers; every copy and kernel runs on the legacy
// default stream in call order, and host <-> device copies return when done. Plain C++
// over the CUDA runtime, usable from .cpp and .cu files; CUDA builds only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "runtime/device_buffer.h"

namespace gdn {

namespace cuda_detail {
enum class Copy { to_device, to_host, within };
void copy_bytes(void* dst, const void* src, std::size_t bytes, Copy kind);
}  // namespace cuda_detail

struct Cuda {
  static constexpr const char* kName = "cuda";
  template <typename T>
  using Vector = DeviceBuffer<T>;

  template <typename T>
  static void upload(T* dst, const T* host, std::size_t n) {
    cuda_detail::copy_bytes(dst, host, n * sizeof(T), cuda_detail::Copy::to_device);
  }
  template <typename T>
  static void download(T* host, const T* src, std::size_t n) {
    cuda_detail::copy_bytes(host, src, n * sizeof(T), cuda_detail::Copy::to_host);
  }
  template <typename T>
  static void copy(T* dst, const T* src, std::size_t n) {
    if (dst != src) cuda_detail::copy_bytes(dst, src, n * sizeof(T), cuda_detail::Copy::within);
  }
  // A kernel each (T = float, double, int32_t, int64_t). copy_rows indexes in 64 bits, so
  // rows of any length and stride work (cudaMemcpy2D's pitch stops at 2^31 bytes).
  template <typename T>
  static void fill(T* dst, std::size_t n, T value);
  template <typename T>
  static void copy_rows(T* dst, std::int64_t dst_stride, const T* src, std::int64_t src_stride,
                        std::int64_t len, std::int64_t rows);
  // cudaDeviceSynchronize: waits for every queued kernel and copy, and reports their errors.
  static void synchronize();
  // Free and total bytes of this GPU's memory (cudaMemGetInfo).
  static void memory_info(std::size_t* free_bytes, std::size_t* total_bytes);
  // The most bytes of device buffers held at once so far (the buffer pool's high mark;
  // cuBLAS's and NCCL's own memory is not in it).
  static std::int64_t peak_bytes();
};

}  // namespace gdn
