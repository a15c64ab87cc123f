// The register walks of gdn/register_walk.h on the GPU, for float passes in the bf16 mode:
// prepare() (gdn/register_prepare.h), LocalPass::output's state walk and its outputs
// (gdn/register_outputs.h), transition(),
// adjoint() and backward()'s adjoint walk (part (a)), each with the arguments of the
// kernel it replaces. Each returns false, launching nothing,
// where the shape, the buffers' alignment or GDN_CUDA_WALK=tiled rule it out; the caller
// then runs the tiled walk. bv: the column tile width the caller's launch rule chose.
// A translation unit of its own, compiled beside the passes' (local_pass_cuda.cu).
#pragma once

#include "gdn/pass_args.h"

namespace gdn::pass {

bool register_prepare(const PassArgs<float>& a);
bool register_state_walk(const PassArgs<float>& a, const float* h_in, float* ht, int bv);
bool register_transition(const PassArgs<float>& a, float* M, float* U, int bv);
bool register_adjoint(const PassArgs<float>& a, const float* dO, const float* dht, float* D,
                      int bv);
bool register_outputs(const PassArgs<float>& a, float* o);
bool register_backward_walk(const PassArgs<float>& a, const float* lambda, const float* dO,
                            const float* dht, float* dh0, int bv);

}  // namespace gdn::pass
