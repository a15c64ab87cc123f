// L2 normalisation of rows, y = x / sqrt(|x|^2 + eps), and its backward
// dx = dy / n - x (x . dy) / n^3: the GDN core's optional q/k norm (docs/design.md §2b).
// The row functions are one source for the host loops and the CUDA kernels.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/device.h"
#include "core/hd.h"

namespace gdn {

inline constexpr double kL2NormEps = 1e-6;

// 1 / sqrt(|x|^2 + eps) of the row x(0), ..., x(dim - 1): y = x times it. Kernels that read
// the row in another form (bf16, widened as they load it) get l2norm_row's bits from it:
// every multiply-add is said outright (hd::fma), so no compiler contracts one form's sums
// and not the other's.
template <typename T, typename X>
GDN_HD inline T l2norm_factor(X x, int dim) {
  T ss = 0;
  for (int d = 0; d < dim; ++d) ss = hd::fma(x(d), x(d), ss);
  return T(1) / hd::sqrt(ss + T(kL2NormEps));
}

template <typename T>
GDN_HD inline void l2norm_row(const T* x, int dim, T* y) {
  const T inv = l2norm_factor<T>([x](int d) { return x[d]; }, dim);
  for (int d = 0; d < dim; ++d) y[d] = x[d] * inv;
}

// dx may alias dy (the row is read before it is written). x: a pointer, or a row with
// x[d] -> T (Bf16Row: bf16, widened as it is read).
template <typename X, typename T>
GDN_HD inline void l2norm_row_backward(const X& x, const T* dy, int dim, T* dx) {
  T ss = 0, xdy = 0;
  for (int d = 0; d < dim; ++d) {
    const T xd = x[d];
    ss = hd::fma(xd, xd, ss);
    xdy = hd::fma(xd, T(dy[d]), xdy);
  }
  const T n = hd::sqrt(ss + T(kL2NormEps));
  const T inv = T(1) / n, c = xdy / (n * n * n);
  for (int d = 0; d < dim; ++d) {
    const T xc = x[d] * c;  // rounded: the fma below takes it as its addend
    dx[d] = hd::fma(dy[d], inv, -xc);
  }
}

// A bf16 row read as floats.
struct Bf16Row {
  const Bf16* h;
  GDN_HD float operator[](int d) const { return to_float(h[d]); }
};

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
