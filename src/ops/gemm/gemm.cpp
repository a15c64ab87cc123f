// la::gemm and la::gemm_bf16: the kernels of the path in use (gemm_path.h), with scratch
// that each thread keeps between calls.
#include "ops/gemm/gemm.h"

#include <vector>

#include "core/error.h"
#include "ops/gemm/gemm_path.h"

namespace gdn::la {

namespace {

template <typename T>
T* scratch(long elems) {
  thread_local std::vector<T> buf;
  if (buf.size() < std::size_t(elems)) buf.resize(std::size_t(elems));
  return buf.data();
}

// Elements of T per vector of g's ISA.
template <typename T>
int lanes(const GemmKernels& g) {
  return g.lanes * int(sizeof(float)) / int(sizeof(T));
}

template <typename T>
GemmFn<T> kernel(const GemmKernels& g) {
  if constexpr (sizeof(T) == 4)
    return g.sgemm;
  else
    return g.dgemm;
}

}  // namespace

int gemm_tile_rows() {
  return gemm_kernels().tile_rows;
}

template <typename T>
int gemm_lanes() {
  return lanes<T>(gemm_kernels());
}

template <typename T>
void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb,
          T beta, T* C, int ldc, Structure s) {
  const GemmKernels& g = gemm_kernels();
  kernel<T>(g)(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s,
               scratch<T>(2L * lanes<T>(g) * (k > 0 ? k : 0)));
}

template int gemm_lanes<float>();
template int gemm_lanes<double>();
template void gemm<float>(bool, bool, int, int, int, float, const float*, int, const float*, int,
                          float, float*, int, Structure);
template void gemm<double>(bool, bool, int, int, int, double, const double*, int, const double*,
                           int, double, double*, int, Structure);

void gemm_bf16(int m, int n, int k, const Bf16* A, int lda, const Bf16* B, int ldb, float beta,
               float* C, int ldc) {
  GDN_CHECK(k % 2 == 0, "gemm_bf16: k = ", k, ", expected an even k (pad with a zero pair)");
  const GemmKernels& g = gemm_kernels();
  g.bgemm(m, n, k, A, lda, B, ldb, beta, C, ldc, scratch<float>(bf16_scratch(m, n, k, g.lanes)));
}

}  // namespace gdn::la
