// The bias of a linear layer (attention_bias): y[n] += b, and its gradient db += sum_n dy[n].
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// bias_add: y [N, out] += b [out] per row.
// bias_backward: db [out] += column sums of dy [N, out] (bit-identical for any thread count;
// on the GPU by the deterministic column sums).
#define GDN_BIAS_OPS(PREFIX, Dev, T)                                    \
  PREFIX void bias_add(Dev, T* y, const T* b, std::int64_t N, int out); \
  PREFIX void bias_backward(Dev, const T* dy, std::int64_t N, int out, T* db);
GDN_DECLARE_ON_DEVICES(GDN_BIAS_OPS)

}  // namespace gdn::ops
