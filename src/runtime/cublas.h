// The cuBLAS handle of this thread on the current GPU, created on first use with the
// default math mode (no TF32 for fp32 GEMMs), on the legacy default stream. CUDA builds only.
#pragma once

#include <cublas_v2.h>

namespace gdn {

cublasHandle_t cublas_handle();

}  // namespace gdn
