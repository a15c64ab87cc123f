#include <algorithm>

#include "gdn/pairs/pair_algebra.h"
#include "gdn/pairs/pair_scan.h"

namespace gdn {

template <typename T>
void scan_states(Host, const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                 const PairDims& d, T* x) {
  const int K = d.K, V = d.V;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < d.BH; ++bh) {
    std::vector<T> tmp(std::size_t(K) * V);
    T* xb = x + std::size_t(bh) * K * V;
    std::fill(xb, xb + K * V, T(0));
    for (int i = 0; i < r; ++i)
      pairs::apply(false, A[i] + std::size_t(bh) * K * K, B[i] + std::size_t(bh) * K * V, K, V, xb,
                   tmp.data());
  }
}

template <typename T>
void scan_adjoints(Host, const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                   const PairDims& d, T* lambda) {
  const int K = d.K, V = d.V, P = int(A.size());
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < d.BH; ++bh) {
    std::vector<T> tmp(std::size_t(K) * V);
    T* yb = lambda + std::size_t(bh) * K * V;
    std::fill(yb, yb + K * V, T(0));
    for (int i = P - 1; i > r; --i)
      pairs::apply(true, A[i] + std::size_t(bh) * K * K, B[i] + std::size_t(bh) * K * V, K, V, yb,
                   tmp.data());
  }
}

template void scan_states(Host, const std::vector<const float*>&, const std::vector<const float*>&,
                          int, const PairDims&, float*);
template void scan_states(Host, const std::vector<const double*>&,
                          const std::vector<const double*>&, int, const PairDims&, double*);
template void scan_adjoints(Host, const std::vector<const float*>&,
                            const std::vector<const float*>&, int, const PairDims&, float*);
template void scan_adjoints(Host, const std::vector<const double*>&,
                            const std::vector<const double*>&, int, const PairDims&, double*);

}  // namespace gdn
