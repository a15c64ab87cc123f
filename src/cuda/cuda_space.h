// The device Space of GdnContextParallel (see src/cp/host_space.h for the interface):
// buffers in device memory, the local passes and the pair scans as CUDA kernels. The
// Communicator given to GdnContextParallel<T, CudaSpace<T>> must take device buffers
// (the NCCL or staging communicator of src/comm/device_communicator.h).
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "cp/pair_scan.h"
#include "cuda/cuda_l2norm.h"
#include "cuda/cuda_local_pass.h"
#include "cuda/device_vector.h"

namespace gdn {

template <typename T>
struct CudaSpace {
  using Vector = DeviceVector<T>;
  using Pass = CudaLocalPass<T>;
  using Normalizer = CudaQKNormalizer<T>;

  // Host <-> device copies for apps moving their inputs in and outputs out.
  static Vector upload(const T* host, std::size_t n) {
    Vector v(n);
    v.upload(host);
    return v;
  }
  static void download(const Vector& v, T* host) { v.download(host); }

  static void fill(T* p, std::size_t n, T value);
  static void copy(T* dst, const T* src, std::size_t n);
  static void add_into(T* dst, const T* src, std::size_t n);  // dst += src
  // As HostSpace: A[i], B[i] are device pointers to rank i's gathered pair; the pointer
  // lists themselves are host vectors (copied to the device here). One block per (b, h),
  // sequential over the ranks.
  static void scan_states(const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                          const PairDims& d, T* x);
  static void scan_adjoints(const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                            const PairDims& d, T* lambda);
  // Not on the CUDA path yet: throws gdn::Error.
  static void log_depth_scan(Communicator& comm, const T* A, const T* B, const PairDims& d,
                             bool reverse, const std::string& site, T* out);
};

}  // namespace gdn
