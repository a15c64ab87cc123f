// bf16 GEMMs through cuBLASLt, as Megatron's linears run (TransformerEngine's cublasLtMatmul on
// bf16 operands): A and B bf16, fp32 sums (CUBLAS_COMPUTE_32F), C fp32. Half the operand
// bytes of the float operands cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF reads, and the Hopper
// kernels that take their operands from shared memory as bf16. One handle and a 32 MiB
// workspace (NVIDIA's recommendation for Hopper) per thread and device; the matmul, layout
// descriptors and the heuristic's algorithm are made once per shape and pointer alignment and
// kept for the process. Runs on the legacy default stream, as every Cuda op. CUDA builds only.
#pragma once

#include <cublas_v2.h>

#include "core/bf16.h"

namespace gdn {

// C [m, n] = op(A) op(B) + beta C, column-major (BLAS's conventions: op(A) is m x k, lda,
// ldb, ldc the leading dimensions); beta is 0 (overwrite) or 1 (accumulate). m, n, k > 0.
void lt_matmul_bf16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const Bf16* A,
                    int lda, const Bf16* B, int ldb, float beta, float* C, int ldc);

}  // namespace gdn
