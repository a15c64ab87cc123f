// The bf16 mode's expert linears on cuBLAS's grouped GEMM (cublasGemmGroupedBatchedEx), as
// TransformerEngine's GroupedLinear runs them on cuBLAS: one problem per expert with rows,
// bf16 operands and output, fp32 sums. The per-expert counts come to the host (one copy of
// E + 1 offsets, which waits for the work before it: cuBLAS takes the shapes on the host).
// x, W and dy are narrowed to bf16 (round to nearest even) and the bf16 results widened
// into the float outputs; dW_e's bf16 product is added to the float dW as Megatron adds a
// bf16 weight gradient into its fp32 main gradient. Float only; the two functions below
// exist in CUDA builds only.
#pragma once

#include <cstdint>

namespace gdn::ops {

// The offsets (host memory) partition the R rows: offsets[0] == 0, offsets[E] == R, none
// decreasing; else throws, naming the expert. (grouped_linear_host.cpp: every build.)
void check_grouped_offsets(const std::int64_t* offsets, int E, std::int64_t R);

// The grouped_linear.h contract, on the library.
void grouped_library_forward(const float* x, const float* W, std::int64_t w_stride,
                             const std::int64_t* offsets, int E, std::int64_t R, int in, int out,
                             float* y);
void grouped_library_backward(const float* x, const float* W, std::int64_t w_stride,
                              const float* dy, const std::int64_t* offsets, int E, std::int64_t R,
                              int in, int out, float* dx, float* dW, bool accumulate);

}  // namespace gdn::ops
