#include "runtime/device_pool.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include "runtime/cuda_check.h"

namespace gdn::cuda_detail {

namespace {

// The current device's default pool, set once per process to keep freed memory (one GPU
// per process: device_select.h picks it before the first buffer).
cudaMemPool_t keeping_pool() {
  static std::once_flag once;
  static cudaMemPool_t pool = nullptr;
  std::call_once(once, [] {
    int dev = 0;
    GDN_CUDA_CHECK(cudaGetDevice(&dev));
    GDN_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
    std::uint64_t keep_all = UINT64_MAX;
    GDN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  });
  return pool;
}

}  // namespace

void* pool_alloc(std::size_t bytes) {
  keeping_pool();
  void* p = nullptr;
  GDN_CUDA_CHECK(cudaMallocAsync(&p, bytes, cudaStreamLegacy));
  return p;
}

void pool_free(void* p) noexcept {
  if (p) cudaFreeAsync(p, cudaStreamLegacy);  // errors ignored: called from destructors
}

std::size_t pool_reserved_bytes() {
  std::uint64_t v = 0;
  GDN_CUDA_CHECK(cudaMemPoolGetAttribute(keeping_pool(), cudaMemPoolAttrReservedMemCurrent, &v));
  return std::size_t(v);
}

std::size_t pool_used_peak_bytes() {
  std::uint64_t v = 0;
  GDN_CUDA_CHECK(cudaMemPoolGetAttribute(keeping_pool(), cudaMemPoolAttrUsedMemHigh, &v));
  return std::size_t(v);
}

}  // namespace gdn::cuda_detail
