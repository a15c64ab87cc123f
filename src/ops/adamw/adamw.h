// The optimizer's element-wise pieces: one AdamW update, the sum of squares behind the
// global gradient norm, and the clipping scale. The update runs in T (as PyTorch's AdamW
// in the parameters' dtype) with its per-step constants computed in double and rounded
// once; the sums of squares and the scale in double. Both devices alike.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// adamw_update: one AdamW update of n elements: p *= 1 - lr * wd (pass wd = 0 for
//   parameters without decay), then m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
//   p -= lr * (m / bc1) / (sqrt(v / bc2) + eps) with bc = 1 - beta^(step + 1), step 0-based.
//   g is read as T(double(g) * grad_scale): gradient clipping folded into the update, the
//   bits of scale(g, grad_scale) and then the update without the extra pass over g.
// sum_squares: sum_i double(g_i)^2. Host: fixed blocks, each in 8 running sums, then the
//   blocks in order (parallel over blocks). CUDA: fixed
//   per-block partials, then one block sums them in a fixed order. Either way the bits
//   depend on n alone.
// scale: g = T(double(g) * s).
template <typename T>
void adamw_update(Host, T* p, const T* g, T* m, T* v, std::int64_t n, double lr, double beta1,
                  double beta2, double eps, double wd, std::int64_t step, double grad_scale = 1.0);
template <typename T>
void adamw_update(Cuda, T* p, const T* g, T* m, T* v, std::int64_t n, double lr, double beta1,
                  double beta2, double eps, double wd, std::int64_t step, double grad_scale = 1.0);
template <typename T>
double sum_squares(Host, const T* g, std::int64_t n);
template <typename T>
double sum_squares(Cuda, const T* g, std::int64_t n);
template <typename T>
void scale(Host, T* g, std::int64_t n, double s);
template <typename T>
void scale(Cuda, T* g, std::int64_t n, double s);

}  // namespace gdn::ops
