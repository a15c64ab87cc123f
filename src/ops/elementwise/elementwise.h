// y = a + b over n elements (y may be a or b): the residual stream and summed gradients.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

template <typename T>
void add(Host, T* y, const T* a, const T* b, std::int64_t n);
template <typename T>
void add(Cuda, T* y, const T* a, const T* b, std::int64_t n);

}  // namespace gdn::ops
