// L2 normalisation of rows, y = x / sqrt(|x|^2 + eps), and its backward
// dx = dy / n - x (x . dy) / n^3: the GDN core's optional q/k norm (docs/design.md §2b).
// The row functions are one source for the host loops and the CUDA kernels.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/hd.h"

namespace gdn {

inline constexpr double kL2NormEps = 1e-6;

template <typename T>
GDN_HD inline void l2norm_row(const T* x, int dim, T* y) {
  T ss = 0;
  for (int d = 0; d < dim; ++d) ss += x[d] * x[d];
  const T inv = T(1) / hd::sqrt(ss + T(kL2NormEps));
  for (int d = 0; d < dim; ++d) y[d] = x[d] * inv;
}

// dx may alias dy (the row is read before it is written).
template <typename T>
GDN_HD inline void l2norm_row_backward(const T* x, const T* dy, int dim, T* dx) {
  T ss = 0, xdy = 0;
  for (int d = 0; d < dim; ++d) {
    ss += x[d] * x[d];
    xdy += x[d] * dy[d];
  }
  const T n = hd::sqrt(ss + T(kL2NormEps));
  const T inv = T(1) / n, c = xdy / (n * n * n);
  for (int d = 0; d < dim; ++d) dx[d] = dy[d] * inv - x[d] * c;
}

namespace ops {

// l2norm_rows: each of `rows` rows of `dim` elements, y = x / sqrt(|x|^2 + eps).
// l2norm_rows_backward: dx may alias dy.
template <typename T>
void l2norm_rows(Host, const T* x, std::int64_t rows, int dim, T* y);
template <typename T>
void l2norm_rows(Cuda, const T* x, std::int64_t rows, int dim, T* y);
template <typename T>
void l2norm_rows_backward(Host, const T* x, const T* dy, std::int64_t rows, int dim, T* dx);
template <typename T>
void l2norm_rows_backward(Cuda, const T* x, const T* dy, std::int64_t rows, int dim, T* dx);

}  // namespace ops
}  // namespace gdn
