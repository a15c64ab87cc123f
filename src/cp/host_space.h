// Where the CP core runs: HostSpace keeps every buffer in host memory and runs the local
// passes and the pair scans on the CPU. GdnContextParallel is written once against this
// small interface; the CUDA build adds a device space (src/cuda) with the same members.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "cp/pair_scan.h"
#include "gdn/l2norm.h"
#include "gdn/local_pass.h"

namespace gdn {

template <typename T>
struct HostSpace {
  using Vector = std::vector<T>;
  using Pass = LocalPass<T>;
  using Normalizer = QKNormalizer<T>;

  // A copy of n host elements in this space, and back: what an app uses to move its
  // inputs in and its outputs out (trivial here; host <-> device in the CUDA space).
  static Vector upload(const T* host, std::size_t n) { return Vector(host, host + n); }
  static void download(const Vector& v, T* host) { std::copy(v.begin(), v.end(), host); }

  static void fill(T* p, std::size_t n, T value) { std::fill(p, p + n, value); }
  static void copy(T* dst, const T* src, std::size_t n) { std::copy_n(src, n, dst); }
  // dst += src over n elements.
  static void add_into(T* dst, const T* src, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
  }
  // x = the state entering rank r: the maps (A[i], B[i]) of ranks 0 .. r-1 from zero.
  static void scan_states(const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                          const PairDims& d, T* x) {
    scan_states_from(A, B, r, d, x);
  }
  // lambda = the adjoint leaving rank r: y -> A[i]^T y + B[i] of ranks P-1 .. r+1 from zero.
  static void scan_adjoints(const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                            const PairDims& d, T* lambda) {
    scan_adjoints_from(A, B, r, d, lambda);
  }
  static void log_depth_scan(Communicator& comm, const T* A, const T* B, const PairDims& d,
                             bool reverse, const std::string& site, T* out) {
    log_depth_exclusive_scan(comm, A, B, d, reverse, site, out);
  }
};

}  // namespace gdn
