// The GDN layer's gated RMSNorm over rows of d (one row per token and value head):
// y = x / sqrt(mean(x^2) + eps) * w * silu(z), w [d] (one-initialised), and its backward.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// gated_rmsnorm_forward:  y [N, d].
// gated_rmsnorm_backward: dx, dz [N, d] overwritten (either may be null); dw [d] += (may
// be null).
#define GDN_GATED_RMSNORM_OPS(PREFIX, Dev, T)                                                \
  PREFIX void gated_rmsnorm_forward(Dev, const T* x, const T* z, const T* w, std::int64_t N, \
                                    int d, double eps, T* y);                                \
  PREFIX void gated_rmsnorm_backward(Dev, const T* x, const T* z, const T* w, const T* dy,   \
                                     std::int64_t N, int d, double eps, T* dx, T* dz, T* dw);
GDN_DECLARE_ON_DEVICES(GDN_GATED_RMSNORM_OPS)

}  // namespace gdn::ops
