// HostExec's gemm: the register-blocked la::gemm. ChunkKernel<T, HostExec> is compiled
// once, with the phases' bodies, by the host passes (gdn/pass/local_pass_host.cpp).
#include "gdn/chunk/host_exec.h"

#include "ops/gemm/gemm.h"

namespace gdn {

template <typename T>
void HostExec::gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B,
                    int ldb, T beta, T* C, int ldc, Structure s) {
  la::gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
}

template void HostExec::gemm<float>(bool, bool, int, int, int, float, const float*, int,
                                    const float*, int, float, float*, int, Structure);
template void HostExec::gemm<double>(bool, bool, int, int, int, double, const double*, int,
                                     const double*, int, double, double*, int, Structure);

}  // namespace gdn
