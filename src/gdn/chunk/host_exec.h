// The host execution policy of ChunkKernel (chunk_kernel.h): one CPU thread, the
// register-blocked la::gemm of ops/gemm/gemm.h (defined in host_exec.cpp, so this header
// stays free of the host SIMD code), and ChunkMath, the kernel with its own workspace that
// the CPU passes make one of per thread.
#pragma once

#include <vector>

#include "gdn/chunk/chunk_kernel.h"

namespace gdn {

struct HostExec {
  static constexpr bool serial = true;
  GDN_HD static constexpr int tid() { return 0; }
  GDN_HD static constexpr int nthreads() { return 1; }
  GDN_HD static void sync() {}
  template <typename T>
  static void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B,
                   int ldb, T beta, T* C, int ldc, Structure s = Structure::kDense);
};

// A ChunkKernel on one CPU thread that owns its workspace. Make one per thread.
template <typename T>
class ChunkMath {
 public:
  using Kernel = ChunkKernel<T, HostExec>;
  ChunkMath(int C, int K, int V, T scale)
      : ws_(Kernel::workspace_size(C, K, V)), k_(C, K, V, scale, ws_.data()) {}
  ChunkMath(const ChunkMath&) = delete;  // k_ points into ws_
  ChunkMath& operator=(const ChunkMath&) = delete;

  const ChunkFactors<T>& layout() const { return k_.layout(); }
  void prepare(const ChunkRows<T>& rows, T* f) { k_.prepare(rows, f); }
  void step(const T* f, T* h, T* o) { k_.step(f, h, o); }
  void compose(const T* f, T* M) { k_.compose(f, M); }
  void adjoint(const T* f, T* mu, const T* dO) { k_.adjoint(f, mu, dO); }
  void backward(const ChunkRows<T>& rows, const T* h, const T* dO, T* dh,
                const ChunkRowGrads<T>& out) {
    k_.backward(rows, h, dO, dh, out);
  }

 private:
  std::vector<T> ws_;
  Kernel k_;
};

// Compiled once, with every phase's bodies, in gdn/pass/local_pass_host.cpp.
extern template class ChunkKernel<float, HostExec>;
extern template class ChunkKernel<double, HostExec>;

}  // namespace gdn
