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

template <typename T>
void start_scan(Host, const T* A, const T* B, const PairDims& d, bool reverse, T* own, T* prefix) {
  const int K = d.K;
  const std::int64_t na = d.a_elems(), nb = d.b_elems();
  for (int bh = 0; bh < d.BH; ++bh) {
    const std::size_t a = std::size_t(bh) * K * K;
    if (reverse)
      pairs::transpose(A + a, K, own + a);
    else
      std::copy_n(A + a, K * K, own + a);
    std::fill_n(prefix + a, K * K, T(0));
    for (int i = 0; i < K; ++i) prefix[a + std::size_t(i) * K + i] = T(1);
  }
  std::copy_n(B, nb, own + na);
  std::fill_n(prefix + na, nb, T(0));
}

template <typename T>
void compose_pairs(Host, const T* outer, const T* inner, const PairDims& d, bool offset_only,
                   T* dst, T* tmp) {
  const int K = d.K, V = d.V;
  const std::int64_t na = d.a_elems();
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < d.BH; ++bh) {
    const std::size_t a = std::size_t(bh) * K * K, b = na + std::size_t(bh) * K * V;
    pairs::compose(outer + a, outer + b, inner + a, inner + b, K, V,
                   offset_only ? nullptr : tmp + a, tmp + b);
  }
  const std::int64_t from = offset_only ? na : 0;
  std::copy_n(tmp + from, d.pair_elems() - from, dst + from);
}

template void scan_states(Host, const std::vector<const float*>&, const std::vector<const float*>&,
                          int, const PairDims&, float*);
template void scan_states(Host, const std::vector<const double*>&,
                          const std::vector<const double*>&, int, const PairDims&, double*);
template void scan_adjoints(Host, const std::vector<const float*>&,
                            const std::vector<const float*>&, int, const PairDims&, float*);
template void scan_adjoints(Host, const std::vector<const double*>&,
                            const std::vector<const double*>&, int, const PairDims&, double*);
template void start_scan(Host, const float*, const float*, const PairDims&, bool, float*, float*);
template void start_scan(Host, const double*, const double*, const PairDims&, bool, double*,
                         double*);
template void compose_pairs(Host, const float*, const float*, const PairDims&, bool, float*,
                            float*);
template void compose_pairs(Host, const double*, const double*, const PairDims&, bool, double*,
                            double*);

}  // namespace gdn
