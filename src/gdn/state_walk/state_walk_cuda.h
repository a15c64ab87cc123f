// The forward walks' launches on the GPU (state_walk_cuda.cu): transition (the slice's
// (M, U)) and the output pass's state walk, which keeps every chunk's entry state. Each
// runs the bf16 register walk (state_walk_bf16.h) where prepare() made Bf16Factors blocks,
// the tiled CudaExec walk otherwise. `a` is configured (gdn/chunk/cuda_launch.cuh).
#pragma once

#include "gdn/chunk/pass_args.h"

namespace gdn::pass {

template <typename T>
void launch_transition(const PassArgs<T>& a, T* M, T* U);
template <typename T>
void launch_state_walk(const PassArgs<T>& a, const T* h_in, T* ht);

}  // namespace gdn::pass
