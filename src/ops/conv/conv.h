// The GDN layer's causal depthwise conv1d + SiLU over C channels, kernel W, no bias, per
// batch row, and its backward. x [B, (W - 1) + T, C] holds W - 1 rows of history (the
// halo: zeros at the sequence start, the previous rank's last rows under context
// parallelism, see conv_halo.h) followed by the T rows of this shard:
// y[b, t, c] = silu(sum_j w[c, j] x[b, t + j, c]), w [C, W] (j = W - 1 is the current
// token, as PyTorch's conv1d with padding W - 1 and the output cut to T).
// pos [B, T] (may be null): each output row's position inside its packed document (cp/
// documents.h); the taps that reach before the document's start (W - 1 - j > pos) are left
// out, forward and backward, as a conv over each document alone would (causal_conv1d's
// seq_idx).
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// causal_conv_silu_forward:  y [B, T, C].
// causal_conv_silu_backward: dx [B, (W - 1) + T, C] overwritten (the halo rows get their
// gradient too; may be null); dw [C, W] += (may be null).
template <typename T>
void causal_conv_silu_forward(Host, const T* x, const T* w, int B, std::int64_t T_len, int C, int W,
                              T* y, const std::int64_t* pos = nullptr);
template <typename T>
void causal_conv_silu_forward(Cuda, const T* x, const T* w, int B, std::int64_t T_len, int C, int W,
                              T* y, const std::int64_t* pos = nullptr);
template <typename T>
void causal_conv_silu_backward(Host, const T* x, const T* w, const T* dy, int B, std::int64_t T_len,
                               int C, int W, T* dx, T* dw, const std::int64_t* pos = nullptr);
template <typename T>
void causal_conv_silu_backward(Cuda, const T* x, const T* w, const T* dy, int B, std::int64_t T_len,
                               int C, int W, T* dx, T* dw, const std::int64_t* pos = nullptr);

}  // namespace gdn::ops
