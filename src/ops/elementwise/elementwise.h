// Element-wise ops: y = a + b (the residual stream and summed gradients), and the
// sigmoid gate of the attention output, y = x sigmoid(g).
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// add: y = a + b over n elements (y may be a or b).
// sigmoid_gate_forward: y = x sigmoid(g) over n elements.
// sigmoid_gate_backward: dx, dg overwritten (either may be null).
#define GDN_ELEMENTWISE_OPS(PREFIX, Dev, T)                                                   \
  PREFIX void add(Dev, T* y, const T* a, const T* b, std::int64_t n);                         \
  PREFIX void sigmoid_gate_forward(Dev, const T* x, const T* g, std::int64_t n, T* y);        \
  PREFIX void sigmoid_gate_backward(Dev, const T* x, const T* g, const T* dy, std::int64_t n, \
                                    T* dx, T* dg);
GDN_DECLARE_ON_DEVICES(GDN_ELEMENTWISE_OPS)

}  // namespace gdn::ops
