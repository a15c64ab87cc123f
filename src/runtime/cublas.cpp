#include "runtime/cublas.h"

#include <cuda_runtime.h>

#include <map>

#include "runtime/cuda_check.h"

namespace gdn {

namespace {

// One handle per device for this thread, destroyed when the thread ends.
class Handles {
 public:
  ~Handles() {
    for (auto& [device, h] : handles_) cublasDestroy(h);  // no throw from a destructor
  }
  cublasHandle_t get(int device) {
    auto it = handles_.find(device);
    if (it != handles_.end()) return it->second;
    cublasHandle_t h = nullptr;
    GDN_CUBLAS_CHECK(cublasCreate(&h));
    const cublasStatus_t st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (st != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(h);
      GDN_CUBLAS_CHECK(st);
    }
    handles_[device] = h;
    return h;
  }

 private:
  std::map<int, cublasHandle_t> handles_;
};

}  // namespace

cublasHandle_t cublas_handle() {
  thread_local Handles handles;
  int device = 0;
  GDN_CUDA_CHECK(cudaGetDevice(&device));
  return handles.get(device);
}

}  // namespace gdn
