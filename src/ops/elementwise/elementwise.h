// y = a + b over n elements (y may be a or b): the residual stream and summed gradients.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// add: y = a + b over n elements (y may be a or b).
#define GDN_ELEMENTWISE_OPS(PREFIX, Dev, T) \
  PREFIX void add(Dev, T* y, const T* a, const T* b, std::int64_t n);
GDN_DECLARE_ON_DEVICES(GDN_ELEMENTWISE_OPS)

}  // namespace gdn::ops
