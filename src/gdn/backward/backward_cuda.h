// The chunk backward's launches on the GPU (backward_cuda.cu): part (b), every chunk's
// backward at once from its entry state and exit adjoint (fla's split into two kernels in
// the bf16 mode, backward_bf16.h; ChunkKernel::backward on CudaExec otherwise), then the
// per-value-head dq, dk (dqv, dkv: [G, B, Tl, Hk, K]) summed over each key head's group,
// with the l2norm's backward where the bf16 op normalised q and k inside. `a` is
// configured (gdn/chunk/cuda_launch.cuh).
#pragma once

#include "core/device.h"
#include "gdn/chunk/pass_args.h"

namespace gdn::pass {

template <typename T>
void launch_backward_chunks(const PassArgs<T>& a, const T* dO, GdnGradView<T>& gr, T* dqv, T* dkv);

}  // namespace gdn::pass
