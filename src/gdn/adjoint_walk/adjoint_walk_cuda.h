// The backward walks' launches on the GPU (adjoint_walk_cuda.cu): adjoint (backward phase
// 1's D) and the backward's part (a), which stores every chunk's exit adjoint and dh0. The
// bf16 register walk (adjoint_walk_bf16.h) where prepare() made Bf16Factors blocks, the
// tiled CudaExec walk otherwise. `a` is configured (gdn/chunk/cuda_launch.cuh).
#pragma once

#include "gdn/chunk/pass_args.h"

namespace gdn::pass {

template <typename T>
void launch_adjoint(const PassArgs<T>& a, const T* dO, const T* dht, T* D);
template <typename T>
void launch_backward_walk(const PassArgs<T>& a, const T* lambda, const T* dO, const T* dht, T* dh0);

}  // namespace gdn::pass
