#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_exec.cuh"
#include "cuda/cuda_space.h"

namespace gdn {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void fill_kernel(T* p, std::size_t n, T value) {
  for (std::size_t x = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; x < n;
       x += std::size_t(gridDim.x) * blockDim.x)
    p[x] = value;
}

template <typename T>
__global__ void add_into_kernel(T* dst, const T* src, std::size_t n) {
  for (std::size_t x = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; x < n;
       x += std::size_t(gridDim.x) * blockDim.x)
    dst[x] += src[x];
}

// x_bh <- op(A_i) x_bh + B_i for the `count` maps i = first, first + dir, ..., from x = 0
// (the loops of scan_states_from / scan_adjoints_from in src/cp/pair_scan.cpp).
// tmp: [BH, K, V] scratch.
template <typename T>
__global__ void scan_kernel(const T* const* A, const T* const* B, int first, int dir, int count,
                            bool transpose, PairDims d, T* x, T* tmp) {
  const CudaExec ex;
  const std::int64_t KK = std::int64_t(d.K) * d.K, KV = std::int64_t(d.K) * d.V;
  for (int bh = blockIdx.x; bh < d.BH; bh += gridDim.x) {
    T* xb = x + bh * KV;
    T* tb = tmp + bh * KV;
    for (std::int64_t e = threadIdx.x; e < KV; e += blockDim.x) xb[e] = 0;
    for (int n = 0; n < count; ++n) {
      const int i = first + dir * n;
      const T* Bi = B[i] + bh * KV;
      for (std::int64_t e = threadIdx.x; e < KV; e += blockDim.x) tb[e] = Bi[e];
      ex.gemm(transpose, false, d.K, d.V, d.K, T(1), A[i] + bh * KK, d.K, xb, d.V, T(1), tb, d.V);
      for (std::int64_t e = threadIdx.x; e < KV; e += blockDim.x) xb[e] = tb[e];
      __syncthreads();
    }
  }
}

template <typename T>
void run_scan(const std::vector<const T*>& A, const std::vector<const T*>& B, int first, int dir,
              int count, bool transpose, const PairDims& d, T* x) {
  GDN_CHECK(A.size() == B.size(), "CudaSpace scan: ", A.size(), " A blocks but ", B.size(),
            " B blocks");
  if (d.BH == 0) return;
  DeviceVector<const T*> dA(A.size()), dB(B.size());
  dA.upload(A.data());
  dB.upload(B.data());
  DeviceVector<T> tmp(std::size_t(d.b_elems()));
  const int blocks = d.BH < 65535 ? d.BH : 65535;
  scan_kernel<T>
      <<<blocks, kThreads>>>(dA.data(), dB.data(), first, dir, count, transpose, d, x, tmp.data());
  GDN_CUDA_CHECK(cudaGetLastError());
  // dA, dB, tmp are freed on return: cudaFree waits for the kernel.
}

}  // namespace

template <typename T>
void CudaSpace<T>::fill(T* p, std::size_t n, T value) {
  if (n == 0) return;
  const std::size_t want = (n + kThreads - 1) / kThreads;
  const int blocks = int(want < 65535 ? want : 65535);
  fill_kernel<T><<<blocks, kThreads>>>(p, n, value);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void CudaSpace<T>::copy(T* dst, const T* src, std::size_t n) {
  if (n > 0) GDN_CUDA_CHECK(cudaMemcpy(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice));
}

template <typename T>
void CudaSpace<T>::add_into(T* dst, const T* src, std::size_t n) {
  if (n == 0) return;
  const std::size_t want = (n + kThreads - 1) / kThreads;
  const int blocks = int(want < 65535 ? want : 65535);
  add_into_kernel<T><<<blocks, kThreads>>>(dst, src, n);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void CudaSpace<T>::scan_states(const std::vector<const T*>& A, const std::vector<const T*>& B,
                               int r, const PairDims& d, T* x) {
  run_scan(A, B, /*first=*/0, /*dir=*/1, /*count=*/r, /*transpose=*/false, d, x);
}

template <typename T>
void CudaSpace<T>::scan_adjoints(const std::vector<const T*>& A, const std::vector<const T*>& B,
                                 int r, const PairDims& d, T* lambda) {
  const int P = int(A.size());
  run_scan(A, B, /*first=*/P - 1, /*dir=*/-1, /*count=*/P - 1 - r, /*transpose=*/true, d, lambda);
}

template <typename T>
void CudaSpace<T>::log_depth_scan(Communicator&, const T*, const T*, const PairDims&, bool,
                                  const std::string&, T*) {
  throw Error("--log-depth-scan is not available on the CUDA path yet: use the all-gather scan");
}

template struct CudaSpace<float>;
template struct CudaSpace<double>;

}  // namespace gdn
