// The SwiGLU core of the MLP, y = silu(g) * u element-wise (in T on both devices, as the
// host always did), and its backward.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// swiglu_forward:  y = silu(g) u over n elements.
// swiglu_backward: dg, du overwritten (either may be null).
template <typename T>
void swiglu_forward(Host, const T* g, const T* u, std::int64_t n, T* y);
template <typename T>
void swiglu_forward(Cuda, const T* g, const T* u, std::int64_t n, T* y);
template <typename T>
void swiglu_backward(Host, const T* g, const T* u, const T* dy, std::int64_t n, T* dg, T* du);
template <typename T>
void swiglu_backward(Cuda, const T* g, const T* u, const T* dy, std::int64_t n, T* dg, T* du);

}  // namespace gdn::ops
