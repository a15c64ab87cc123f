#include <algorithm>

#include "gdn/pairs/pair_algebra.h"
#include "ops/gemm/gemm.h"

namespace gdn::pairs {

template <typename T>
void apply(bool transpose, const T* A, const T* B, int K, int V, T* x, T* tmp) {
  la::matmul(transpose, false, K, V, K, T(1), A, x, T(0), tmp);
  for (int i = 0; i < K * V; ++i) x[i] = tmp[i] + B[i];
}

template <typename T>
void compose(const T* Ao, const T* Bo, const T* Ai, const T* Bi, int K, int V, T* A, T* B) {
  if (A) la::matmul(false, false, K, K, K, T(1), Ao, Ai, T(0), A);
  std::copy_n(Bo, K * V, B);
  la::matmul(false, false, K, V, K, T(1), Ao, Bi, T(1), B);
}

template <typename T>
void transpose(const T* src, int K, T* dst) {
  for (int i = 0; i < K; ++i)
    for (int j = 0; j < K; ++j) dst[i * K + j] = src[j * K + i];
}

#define GDN_INSTANTIATE(T)                                                         \
  template void apply(bool, const T*, const T*, int, int, T*, T*);                 \
  template void compose(const T*, const T*, const T*, const T*, int, int, T*, T*); \
  template void transpose(const T*, int, T*);
GDN_INSTANTIATE(float)
GDN_INSTANTIATE(double)
#undef GDN_INSTANTIATE

}  // namespace gdn::pairs
