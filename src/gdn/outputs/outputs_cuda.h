// The outputs' launches on the GPU (outputs_cuda.cu): every chunk's outputs from the entry
// states the state walk kept, and output_from_states (recomputation: each chunk steps from
// its kept entry state). The bf16 register kernel (outputs_bf16.h) where prepare() made
// Bf16Factors blocks, CudaExec otherwise. `a` is configured (gdn/chunk/cuda_launch.cuh).
#pragma once

#include "gdn/chunk/pass_args.h"

namespace gdn::pass {

template <typename T>
void launch_outputs(const PassArgs<T>& a, T* o);
template <typename T>
void launch_output_from_states(const PassArgs<T>& a, T* o, T* ht);

}  // namespace gdn::pass
