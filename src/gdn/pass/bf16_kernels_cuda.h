// The register walks of gdn/pass/bf16_walk.h on the GPU, for float passes in the bf16 mode:
// prepare() (gdn/prepare/prepare_bf16.h), LocalPass::output's state walk and its outputs
// (gdn/outputs/outputs_bf16.h), transition(), adjoint(), and backward()'s adjoint walk (part
// (a)) and chunk jobs (part (b), gdn/backward/backward_bf16.h), each with the arguments of the
// kernel it replaces. Each returns false, launching nothing, where the shape, the
// buffers' alignment or GDN_CUDA_WALK=tiled rule it out; the caller then runs the tiled
// kernel. bv: the column tile width the caller's launch rule chose. A translation unit of
// its own, compiled beside the passes' (local_pass_cuda.cu).
#pragma once

#include "gdn/pass/pass_args.h"

namespace gdn::pass {

bool register_prepare(const PassArgs<float>& a);
bool register_state_walk(const PassArgs<float>& a, const float* h_in, float* ht, int bv);
bool register_transition(const PassArgs<float>& a, float* M, float* U, int bv);
bool register_adjoint(const PassArgs<float>& a, const float* dO, const float* dht, float* D,
                      int bv);
bool register_outputs(const PassArgs<float>& a, float* o);
bool register_backward_walk(const PassArgs<float>& a, const float* lambda, const float* dO,
                            const float* dht, float* dh0, int bv);
// Part (b): dq and dk into dqv and dkv (per value head), dv, dg, dbeta into gr; the two
// kernels hand each other their products through a.workspace (workspace_elems of it), as
// many jobs at a time as it holds.
bool register_backward_chunks(const PassArgs<float>& a, const float* dO,
                              const GdnGradView<float>& gr, float* dqv, float* dkv);

}  // namespace gdn::pass
