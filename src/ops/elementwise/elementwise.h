// Element-wise ops: y = a + b (the residual stream and summed gradients), and the
// sigmoid gate of the attention output, y = x sigmoid(g).
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// add: y = a + b over n elements (y may be a or b).
// sigmoid_gate_forward: y = x sigmoid(g) over n elements.
// sigmoid_gate_backward: dx, dg overwritten (either may be null).
template <typename T>
void add(Host, T* y, const T* a, const T* b, std::int64_t n);
template <typename T>
void add(Cuda, T* y, const T* a, const T* b, std::int64_t n);
template <typename T>
void sigmoid_gate_forward(Host, const T* x, const T* g, std::int64_t n, T* y);
template <typename T>
void sigmoid_gate_forward(Cuda, const T* x, const T* g, std::int64_t n, T* y);
template <typename T>
void sigmoid_gate_backward(Host, const T* x, const T* g, const T* dy, std::int64_t n, T* dx, T* dg);
template <typename T>
void sigmoid_gate_backward(Cuda, const T* x, const T* g, const T* dy, std::int64_t n, T* dx, T* dg);

}  // namespace gdn::ops
