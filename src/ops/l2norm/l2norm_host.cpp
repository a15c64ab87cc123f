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

template void l2norm_rows(Host, const float*, std::int64_t, int, float*);
template void l2norm_rows(Host, const double*, std::int64_t, int, double*);
template void l2norm_rows_backward(Host, const float*, const float*, std::int64_t, int, float*);
template void l2norm_rows_backward(Host, const double*, const double*, std::int64_t, int, double*);
}  // namespace gdn::ops
