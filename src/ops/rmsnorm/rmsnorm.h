// Qwen3-Next RMSNorm over rows of d: y = x / sqrt(mean(x^2) + eps) * (1 + w), w [d]
// (zero-initialised), and its backward. Intermediates in double on both devices.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// rmsnorm_forward:  y [N, d].
// rmsnorm_backward: dx [N, d] overwritten (may be null); dw [d] += (may be null).
#define GDN_RMSNORM_OPS(PREFIX, Dev, T)                                                         \
  PREFIX void rmsnorm_forward(Dev, const T* x, const T* w, std::int64_t N, int d, double eps,   \
                              T* y);                                                            \
  PREFIX void rmsnorm_backward(Dev, const T* x, const T* w, const T* dy, std::int64_t N, int d, \
                               double eps, T* dx, T* dw);
GDN_DECLARE_ON_DEVICES(GDN_RMSNORM_OPS)

}  // namespace gdn::ops
