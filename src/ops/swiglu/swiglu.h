// The SwiGLU core of the MLP, y = silu(g) * u element-wise (in T on both devices, as the
// host always did), and its backward.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// swiglu_forward:  y = silu(g) u over n elements.
// swiglu_backward: dg, du overwritten (either may be null).
#define GDN_SWIGLU_OPS(PREFIX, Dev, T)                                                         \
  PREFIX void swiglu_forward(Dev, const T* g, const T* u, std::int64_t n, T* y);               \
  PREFIX void swiglu_backward(Dev, const T* g, const T* u, const T* dy, std::int64_t n, T* dg, \
                              T* du);
GDN_DECLARE_ON_DEVICES(GDN_SWIGLU_OPS)

}  // namespace gdn::ops
