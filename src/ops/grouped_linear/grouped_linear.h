// The experts' linear layers of a MoE block as one call each (model/moe_mlp.h): the routed
// rows are grouped by expert, expert e's rows [offsets[e], offsets[e + 1]) of x, and expert
// e's weight is W_e = W + e w_stride, [out, in] (the PyTorch layout, rows of in). The
// offsets live in the device's memory: the caller never learns the per-expert counts.
// Conventions of ops/linear/linear.h: input gradients overwritten, parameter gradients
// accumulated, a null gradient pointer skipped; offsets[0] == 0, offsets[E] == R.
//
// The host version runs linear_forward / linear_backward once per non-empty expert (its
// numerics are those of the per-expert loop). The CUDA version runs float in Precision::bf16
// (core/precision.h) on cuBLAS's grouped GEMM (grouped_library.h: bf16 operands and
// products, fp32 sums), or on our one launch over every expert (grouped_tiles.h's schedule:
// bf16 tensor cores with fp32 sums and outputs, ops/mma/mma_bf16.cuh); fp32 and fp64 on that
// launch's SIMT tiles.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/precision.h"

namespace gdn::ops {

// Which kernel runs the bf16 mode's float experts on a GPU. Process-wide, set once: for
// gdn_gemm_bench's comparison of the two until a device run keeps the faster (issue 49).
enum class GroupedKernel { library, tile };
void set_grouped_kernel(GroupedKernel k);
GroupedKernel grouped_kernel();

// grouped_linear_forward:  y[r, out] = x[r, in] W_e^T for the rows r of expert e.
// grouped_linear_backward: dx[r, in] = dy[r] W_e (dx += when accumulate: the bits of
//   dx + (dy W_e), one rounding per element);  dW_e[out, in] += dy_e^T x_e (dW_e =
//   dW + e w_stride).
template <typename T>
void grouped_linear_forward(Host, Precision, const T* x, const T* W, std::int64_t w_stride,
                            const std::int64_t* offsets, int E, std::int64_t R, int in, int out,
                            T* y);
template <typename T>
void grouped_linear_forward(Cuda, Precision, const T* x, const T* W, std::int64_t w_stride,
                            const std::int64_t* offsets, int E, std::int64_t R, int in, int out,
                            T* y);
template <typename T>
void grouped_linear_backward(Host, Precision, const T* x, const T* W, std::int64_t w_stride,
                             const T* dy, const std::int64_t* offsets, int E, std::int64_t R,
                             int in, int out, T* dx, T* dW, bool accumulate = false);
template <typename T>
void grouped_linear_backward(Cuda, Precision, const T* x, const T* W, std::int64_t w_stride,
                             const T* dy, const std::int64_t* offsets, int E, std::int64_t R,
                             int in, int out, T* dx, T* dW, bool accumulate = false);

}  // namespace gdn::ops
