// Qwen3-Next RMSNorm over rows of d: y = x / sqrt(mean(x^2) + eps) * (1 + w), w [d]
// (zero-initialised), and its backward. Intermediates in double on both devices.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// rmsnorm_forward:  y [N, d].
// rmsnorm_backward: dx [N, d] overwritten (may be null); dw [d] += (may be null).
template <typename T>
void rmsnorm_forward(Host, const T* x, const T* w, std::int64_t N, int d, double eps, T* y);
template <typename T>
void rmsnorm_forward(Cuda, const T* x, const T* w, std::int64_t N, int d, double eps, T* y);
template <typename T>
void rmsnorm_backward(Host, const T* x, const T* w, const T* dy, std::int64_t N, int d, double eps,
                      T* dx, T* dw);
template <typename T>
void rmsnorm_backward(Cuda, const T* x, const T* w, const T* dy, std::int64_t N, int d, double eps,
                      T* dx, T* dw);

}  // namespace gdn::ops
