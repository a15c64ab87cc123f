// The WY preparation's launch on the GPU (prepare_cuda.cu): the bf16 register kernel
// (prepare_bf16.h) where prepare() makes Bf16Factors blocks, the CudaExec kernel on
// ChunkFactors otherwise. `a` is configured (gdn/chunk/cuda_launch.cuh) by the caller.
#pragma once

#include "gdn/chunk/pass_args.h"

namespace gdn::pass {

template <typename T>
void launch_prepare(const PassArgs<T>& a);

}  // namespace gdn::pass
