#include "cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <vector>

#include "core/error.h"
#include "cuda/cuda_check.h"

namespace gdn {

namespace {

// y += x through cuBLAS axpy (element-wise, so deterministic).
void axpy(cublasHandle_t h, int n, const float* x, float* y) {
  const float one = 1;
  GDN_CHECK(cublasSaxpy(h, n, &one, x, 1, y, 1) == CUBLAS_STATUS_SUCCESS, "cublasSaxpy failed");
}
void axpy(cublasHandle_t h, int n, const double* x, double* y) {
  const double one = 1;
  GDN_CHECK(cublasDaxpy(h, n, &one, x, 1, y, 1) == CUBLAS_STATUS_SUCCESS, "cublasDaxpy failed");
}

}  // namespace

template <typename T>
CudaBackend<T>::CudaBackend() : s_(std::make_shared<State>()) {}

template <typename T>
void CudaBackend<T>::attach(const ParamStore<T>& ps) {
  const std::size_t n = std::size_t(ps.num_elements());
  s_->values = DeviceVector<T>(n);
  s_->grads = DeviceVector<T>(n);
}

template <typename T>
void CudaBackend<T>::upload_params(const ParamStore<T>& ps) {
  GDN_CHECK(std::size_t(ps.num_elements()) == num_elements(),
            "CudaBackend: upload_params before attach");
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const Param<T>& p = ps[i];
    if (p.value.size() > 0)
      GDN_CUDA_CHECK(cudaMemcpy(s_->values.data() + p.offset, p.value.ptr(),
                                p.value.data.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
}

template <typename T>
void CudaBackend<T>::download_params(ParamStore<T>& ps) const {
  for (std::size_t i = 0; i < ps.size(); ++i) {
    Param<T>& p = ps[i];
    if (p.value.size() > 0)
      GDN_CUDA_CHECK(cudaMemcpy(p.value.ptr(), s_->values.data() + p.offset,
                                p.value.data.size() * sizeof(T), cudaMemcpyDeviceToHost));
  }
}

template <typename T>
void CudaBackend<T>::download_grads(ParamStore<T>& ps) const {
  for (std::size_t i = 0; i < ps.size(); ++i) {
    Param<T>& p = ps[i];
    if (p.grad.size() > 0)
      GDN_CUDA_CHECK(cudaMemcpy(p.grad.ptr(), s_->grads.data() + p.offset,
                                p.grad.data.size() * sizeof(T), cudaMemcpyDeviceToHost));
  }
}

template <typename T>
void CudaBackend<T>::zero_grads(ParamStore<T>&) {
  if (!s_->grads.empty())
    GDN_CUDA_CHECK(cudaMemset(s_->grads.data(), 0, s_->grads.size() * sizeof(T)));
}

template <typename T>
void CudaBackend<T>::upload(T* device, const T* host, std::size_t n) {
  if (n > 0) GDN_CUDA_CHECK(cudaMemcpy(device, host, n * sizeof(T), cudaMemcpyHostToDevice));
}

template <typename T>
void CudaBackend<T>::download(T* host, const T* device, std::size_t n) {
  if (n > 0) GDN_CUDA_CHECK(cudaMemcpy(host, device, n * sizeof(T), cudaMemcpyDeviceToHost));
}

template <typename T>
void CudaBackend<T>::copy(T* dst, const T* src, std::size_t n) {
  if (n > 0 && dst != src)
    GDN_CUDA_CHECK(cudaMemcpy(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice));
}

template <typename T>
void CudaBackend<T>::copy_rows(T* dst, std::int64_t dst_stride, const T* src,
                               std::int64_t src_stride, std::int64_t len, std::int64_t rows) {
  // One strided copy for all rows: the q / k / v split and the halo placement.
  if (len > 0 && rows > 0)
    GDN_CUDA_CHECK(cudaMemcpy2D(dst, dst_stride * sizeof(T), src, src_stride * sizeof(T),
                                len * sizeof(T), rows, cudaMemcpyDeviceToDevice));
}

template <typename T>
void CudaBackend<T>::add(T* y, const T* a, const T* b, std::size_t n) const {
  if (n == 0) return;
  GDN_CHECK(n <= std::size_t(INT32_MAX), "CudaBackend::add: ", n, " elements exceed cuBLAS's int");
  copy(y, a, n);
  axpy(s_->handle, int(n), b, y);
}

template class CudaBackend<float>;
template class CudaBackend<double>;

}  // namespace gdn
