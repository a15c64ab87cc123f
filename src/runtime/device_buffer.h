// A device-memory array with std::vector's small interface (data, size, resize): the
// Vector type of the Cuda device policy (cuda_device.h). New elements are zero
// (cudaMemset), like std::vector's value-initialisation. Move-only. Its memory comes from
// the keeping pool of device_pool.h, so the buffers a step makes and drops cost no
// cudaMalloc / cudaFree after the first step. Plain C++ over the CUDA runtime, usable from
// .cpp and .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "runtime/cuda_check.h"
#include "runtime/device_pool.h"

namespace gdn {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

  // Keeps the first min(size(), n) elements; the rest are zero.
  void resize(std::size_t n) {
    if (n == n_) return;
    T* q = nullptr;
    if (n > 0) {
      q = static_cast<T*>(cuda_detail::pool_alloc(n * sizeof(T)));
      const std::size_t keep = n < n_ ? n : n_;
      if (keep > 0) GDN_CUDA_CHECK(cudaMemcpy(q, p_, keep * sizeof(T), cudaMemcpyDeviceToDevice));
      if (n > keep) GDN_CUDA_CHECK(cudaMemset(q + keep, 0, (n - keep) * sizeof(T)));
    }
    release();
    p_ = q;
    n_ = n;
  }

 private:
  void release() noexcept {
    cuda_detail::pool_free(p_);  // stream-ordered, never throws
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace gdn
