// The pair scans on the GPU: one block per (b, h), sequential over the ranks, the small
// GEMMs by CudaExec's cooperative block GEMM.
#include "core/error.h"
#include "gdn/chunk/cuda_exec.cuh"
#include "gdn/pairs/pair_scan.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn {

namespace {

constexpr int kThreads = 256;

// x_bh <- op(A_i) x_bh + B_i for the `count` maps i = first, first + dir, ..., from x = 0
// (the loops of pair_scan_host.cpp).
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
  GDN_CHECK(A.size() == B.size(), "scan on the GPU: ", A.size(), " A blocks but ", B.size(),
            " B blocks");
  if (d.BH == 0) return;
  const DeviceBuffer<const T*> dA = to_device<Cuda>(A.data(), A.size());
  const DeviceBuffer<const T*> dB = to_device<Cuda>(B.data(), B.size());
  DeviceBuffer<T> tmp(std::size_t(d.b_elems()));
  const int blocks = d.BH < 65535 ? d.BH : 65535;
  scan_kernel<T>
      <<<blocks, kThreads>>>(dA.data(), dB.data(), first, dir, count, transpose, d, x, tmp.data());
  GDN_CUDA_CHECK(cudaGetLastError());
  // dA, dB, tmp are freed on return: cudaFree waits for the kernel.
}

}  // namespace

template <typename T>
void scan_states(Cuda, const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                 const PairDims& d, T* x) {
  run_scan(A, B, /*first=*/0, /*dir=*/1, /*count=*/r, /*transpose=*/false, d, x);
}

template <typename T>
void scan_adjoints(Cuda, const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                   const PairDims& d, T* lambda) {
  const int P = int(A.size());
  run_scan(A, B, /*first=*/P - 1, /*dir=*/-1, /*count=*/P - 1 - r, /*transpose=*/true, d, lambda);
}

template void scan_states(Cuda, const std::vector<const float*>&, const std::vector<const float*>&,
                          int, const PairDims&, float*);
template void scan_states(Cuda, const std::vector<const double*>&,
                          const std::vector<const double*>&, int, const PairDims&, double*);
template void scan_adjoints(Cuda, const std::vector<const float*>&,
                            const std::vector<const float*>&, int, const PairDims&, float*);
template void scan_adjoints(Cuda, const std::vector<const double*>&,
                            const std::vector<const double*>&, int, const PairDims&, double*);

}  // namespace gdn
