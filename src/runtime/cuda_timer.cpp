#include "runtime/cuda_timer.h"

#include <cuda_runtime.h>

#include "runtime/cuda_check.h"

namespace gdn {

double cuda_event_ms(const std::function<void()>& launch) {
  cudaEvent_t start = nullptr, stop = nullptr;
  GDN_CUDA_CHECK(cudaEventCreate(&start));
  GDN_CUDA_CHECK(cudaEventCreate(&stop));
  GDN_CUDA_CHECK(cudaEventRecord(start));
  launch();
  GDN_CUDA_CHECK(cudaEventRecord(stop));
  GDN_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  GDN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  GDN_CUDA_CHECK(cudaEventDestroy(start));
  GDN_CUDA_CHECK(cudaEventDestroy(stop));
  return double(ms);
}

}  // namespace gdn
