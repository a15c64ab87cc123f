// The bias of a linear layer (attention_bias): y[n] += b, and its gradient db += sum_n dy[n].
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// bias_add: y [N, out] += b [out] per row.
// bias_backward: db [out] += column sums of dy [N, out] (bit-identical for any thread count;
// on the GPU by the deterministic column sums).
template <typename T>
void bias_add(Host, T* y, const T* b, std::int64_t N, int out);
template <typename T>
void bias_add(Cuda, T* y, const T* b, std::int64_t N, int out);
template <typename T>
void bias_backward(Host, const T* dy, std::int64_t N, int out, T* db);
template <typename T>
void bias_backward(Cuda, const T* dy, std::int64_t N, int out, T* db);

}  // namespace gdn::ops
