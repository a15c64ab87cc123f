// L2 normalisation of q and k rows, y = x / sqrt(|x|^2 + eps), and its backward
// dx = dy / n - x (x . dy) / n^3. It sits outside the chunk math (DESIGN.md section 2b).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "gdn/hd.h"
#include "gdn/problem.h"

namespace gdn {

inline constexpr double kL2NormEps = 1e-6;

// One row (shared by the CPU loops below and the CUDA kernels of src/cuda).
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

template <typename T>
void l2norm_rows(const T* x, std::int64_t rows, int dim, T* y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) l2norm_row(x + r * dim, dim, y + r * dim);
}

// dx may alias dy.
template <typename T>
void l2norm_rows_backward(const T* x, const T* dy, std::int64_t rows, int dim, T* dx) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r)
    l2norm_row_backward(x + r * dim, dy + r * dim, dim, dx + r * dim);
}

// Holds normalised copies of q and k when the problem asks for them; view() returns the
// tensors the chunk math should read, and backward() maps dq, dk back through the norm.
template <typename T>
class QKNormalizer {
 public:
  QKNormalizer(const GdnProblem& p, std::int64_t tokens, const GdnTensors<T>& in)
      : in_(in), rows_(std::int64_t(p.B) * tokens * p.Hk), dim_(p.K), on_(p.l2norm_qk) {
    view_ = in;
    if (!on_) return;
    qn_.resize(rows_ * dim_);
    kn_.resize(rows_ * dim_);
    l2norm_rows(in.q, rows_, dim_, qn_.data());
    l2norm_rows(in.k, rows_, dim_, kn_.data());
    view_.q = qn_.data();
    view_.k = kn_.data();
  }
  const GdnTensors<T>& view() const { return view_; }
  void backward(T* dq, T* dk) const {
    if (!on_) return;
    l2norm_rows_backward(in_.q, dq, rows_, dim_, dq);
    l2norm_rows_backward(in_.k, dk, rows_, dim_, dk);
  }

 private:
  GdnTensors<T> in_, view_;
  std::int64_t rows_;
  int dim_;
  bool on_;
  std::vector<T> qn_, kn_;
};

}  // namespace gdn
