// The GDN layer's gated RMSNorm over rows of d (one row per token and value head):
// y = x / sqrt(mean(x^2) + eps) * w * silu(z), w [d] (one-initialised), and its backward.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// gated_rmsnorm_forward:  y [N, d].
// gated_rmsnorm_backward: dx, dz [N, d] overwritten (either may be null); dw [d] += (may
// be null).
template <typename T>
void gated_rmsnorm_forward(Host, const T* x, const T* z, const T* w, std::int64_t N, int d,
                           double eps, T* y);
template <typename T>
void gated_rmsnorm_forward(Cuda, const T* x, const T* z, const T* w, std::int64_t N, int d,
                           double eps, T* y);
template <typename T>
void gated_rmsnorm_backward(Host, const T* x, const T* z, const T* w, const T* dy, std::int64_t N,
                            int d, double eps, T* dx, T* dz, T* dw);
template <typename T>
void gated_rmsnorm_backward(Cuda, const T* x, const T* z, const T* w, const T* dy, std::int64_t N,
                            int d, double eps, T* dx, T* dz, T* dw);

}  // namespace gdn::ops
