// The machine's peak FLOP/s, the denominator of MFU (model FLOPs utilisation): a GPU's
// dense peak by its name, from NVIDIA's datasheets (no sparsity), for the precision a run's
// GEMMs use. A CPU's is measured instead (ops/gemm/fma_peak.h): its clock under load is
// what the run gets.
#pragma once

#include <string>

#include "core/dtype.h"

namespace gdn::plan {

// FLOP/s of the GPU named `name` (cudaDeviceProp::name, "NVIDIA H100 80GB HBM3") for a run
// of `dtype`: bf16 on the tensor cores (dense), f32 without TF32 (gdn-cp's default), f64 on
// the FP64 tensor cores; 0 for a GPU not in the table.
double gpu_peak_flops(const std::string& name, DType dtype);

}  // namespace gdn::plan
