// Partial rotary position embedding in the Hugging Face convention (Qwen3-Next's
// apply_rotary_pos_emb with rotate_half): of each head vector x of D entries the first R
// rotate and the rest pass through. With half = R / 2, inv_freq[i] = theta^(-2i / R) and
// angle[i] = pos * inv_freq[i] (in double for any T), for i < half:
//   y[i] = x[i] cos - x[i + half] sin,  y[i + half] = x[i + half] cos + x[i] sin.
// pos lives in the device's memory, like the data.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// rope_forward:  x, y [N, H, D], pos [N] the global position of each row; y may equal x.
// rope_backward: the transpose rotation (by -angle), dx [N, H, D] overwritten; dx may
// equal dy. R must be even with 0 <= R <= D.
template <typename T>
void rope_forward(Host, const T* x, const std::int64_t* pos, std::int64_t N, int H, int D, int R,
                  double theta, T* y);
template <typename T>
void rope_forward(Cuda, const T* x, const std::int64_t* pos, std::int64_t N, int H, int D, int R,
                  double theta, T* y);
template <typename T>
void rope_backward(Host, const T* dy, const std::int64_t* pos, std::int64_t N, int H, int D, int R,
                   double theta, T* dx);
template <typename T>
void rope_backward(Cuda, const T* dy, const std::int64_t* pos, std::int64_t N, int H, int D, int R,
                   double theta, T* dx);

}  // namespace gdn::ops
