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

int grid_for(const PairDims& d) {
  return d.BH < 65535 ? d.BH : 65535;
}

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
  scan_kernel<T><<<grid_for(d), kThreads>>>(dA.data(), dB.data(), first, dir, count, transpose, d,
                                            x, tmp.data());
  GDN_CUDA_CHECK(cudaGetLastError());
  // dA, dB, tmp are freed on return: cudaFree waits for the kernel.
}

// own = (op(A), B), prefix = (I, 0): start_scan of pair_scan.h, a block per (b, h).
template <typename T>
__global__ void start_kernel(const T* A, const T* B, PairDims d, bool reverse, T* own, T* prefix) {
  const std::int64_t KK = std::int64_t(d.K) * d.K, KV = std::int64_t(d.K) * d.V, na = d.a_elems();
  for (int bh = blockIdx.x; bh < d.BH; bh += gridDim.x) {
    for (std::int64_t e = threadIdx.x; e < KK; e += blockDim.x) {
      const std::int64_t i = e / d.K, j = e % d.K;
      own[bh * KK + e] = reverse ? A[bh * KK + j * d.K + i] : A[bh * KK + e];
      prefix[bh * KK + e] = i == j ? T(1) : T(0);
    }
    for (std::int64_t e = threadIdx.x; e < KV; e += blockDim.x) {
      own[na + bh * KV + e] = B[bh * KV + e];
      prefix[na + bh * KV + e] = T(0);
    }
  }
}

// out = outer after inner = (Ao Ai, Ao Bi + Bo), a block per (b, h); out must not alias.
// offset_only: Ao Bi + Bo alone.
template <typename T>
__global__ void compose_kernel(const T* outer, const T* inner, PairDims d, bool offset_only,
                               T* out) {
  const CudaExec ex;
  const std::int64_t KK = std::int64_t(d.K) * d.K, KV = std::int64_t(d.K) * d.V, na = d.a_elems();
  for (int bh = blockIdx.x; bh < d.BH; bh += gridDim.x) {
    const T* Ao = outer + bh * KK;
    T* A = out + bh * KK;
    T* B = out + na + bh * KV;
    // Both products accumulate into C (beta = 1): A from zero, B from Bo.
    if (!offset_only)
      for (std::int64_t e = threadIdx.x; e < KK; e += blockDim.x) A[e] = T(0);
    for (std::int64_t e = threadIdx.x; e < KV; e += blockDim.x) B[e] = outer[na + bh * KV + e];
    if (!offset_only)
      ex.gemm(false, false, d.K, d.K, d.K, T(1), Ao, d.K, inner + bh * KK, d.K, T(1), A, d.K);
    ex.gemm(false, false, d.K, d.V, d.K, T(1), Ao, d.K, inner + na + bh * KV, d.V, T(1), B, d.V);
  }
}

}  // namespace

template <typename T>
void start_scan(Cuda, const T* A, const T* B, const PairDims& d, bool reverse, T* own, T* prefix) {
  if (d.BH == 0) return;
  start_kernel<T><<<grid_for(d), kThreads>>>(A, B, d, reverse, own, prefix);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void compose_pairs(Cuda, const T* outer, const T* inner, const PairDims& d, bool offset_only,
                   T* dst, T* tmp) {
  if (d.BH == 0) return;
  compose_kernel<T><<<grid_for(d), kThreads>>>(outer, inner, d, offset_only, tmp);
  GDN_CUDA_CHECK(cudaGetLastError());
  const std::int64_t from = offset_only ? d.a_elems() : 0;
  Cuda::copy(dst + from, static_cast<const T*>(tmp + from), std::size_t(d.pair_elems() - from));
}

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

template void start_scan(Cuda, const float*, const float*, const PairDims&, bool, float*, float*);
template void start_scan(Cuda, const double*, const double*, const PairDims&, bool, double*,
                         double*);
template void compose_pairs(Cuda, const float*, const float*, const PairDims&, bool, float*,
                            float*);
template void compose_pairs(Cuda, const double*, const double*, const PairDims&, bool, double*,
                            double*);

}  // namespace gdn
