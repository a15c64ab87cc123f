// Conversions between float and the bf16 storage type (core/bf16.h), element by element,
// on either device: what the GDN op's bf16 mode (gdn/bf16_op.h) runs at its edges, and the
// rounding of float arrays to bf16 values.
// to_float is exact; to_bf16 rounds to nearest even.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/device.h"

namespace gdn::ops {

void to_float(Host, const Bf16* x, std::int64_t n, float* y);
void to_bf16(Host, const float* x, std::int64_t n, Bf16* y);
void to_float(Cuda, const Bf16* x, std::int64_t n, float* y);
void to_bf16(Cuda, const float* x, std::int64_t n, Bf16* y);

// x's n values rounded to bf16 (to_bf16) in a new buffer of Dev's memory: the bf16 operands
// of a library GEMM (linear_cuda.cu, grouped_library.cu).
template <typename Dev>
Buffer<Dev, Bf16> to_bf16_copy(const float* x, std::int64_t n) {
  Buffer<Dev, Bf16> b(static_cast<std::size_t>(n));
  to_bf16(Dev{}, x, n, b.data());
  return b;
}

// x[i] = round_bf16(x[i]) in place (core/bf16.h): what storing x in bf16 and reading it
// back gives; the bf16 mode's stored activations (core/precision.h). float and double.
template <typename T>
void round_to_bf16(Host, T* x, std::int64_t n);
template <typename T>
void round_to_bf16(Cuda, T* x, std::int64_t n);

}  // namespace gdn::ops
