// L2 normalisation on the host: a row per loop iteration.
#include "ops/l2norm/l2norm.h"

namespace gdn::ops {

template <typename T>
void l2norm_rows(Host, const T* x, std::int64_t rows, int dim, T* y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) l2norm_row(x + r * dim, dim, y + r * dim);
}

template <typename T>
void l2norm_rows_backward(Host, const T* x, const T* dy, std::int64_t rows, int dim, T* dx) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r)
    l2norm_row_backward(x + r * dim, dy + r * dim, dim, dx + r * dim);
}

GDN_INSTANTIATE_ON(GDN_L2NORM_OPS, Host)
}  // namespace gdn::ops
