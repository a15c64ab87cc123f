// The register walks of gdn/pass/bf16_walk.h on the GPU, for float passes in the bf16 mode
// where prepare() makes Bf16Factors blocks (PassArgs::bf16_factors):
// prepare() (gdn/prepare/prepare_bf16.h), LocalPass::output's state walk and its outputs
// (gdn/outputs/outputs_bf16.h), transition(), adjoint(), and backward()'s adjoint walk (part
// (a)) and chunk jobs (part (b), gdn/backward/backward_bf16.h), each with the arguments of the
// kernel it replaces. Each returns false, launching nothing, where a.bf16_factors is not
// set (the caller then runs the tiled kernel on ChunkFactors blocks), and throws where it
// is set but the kernel cannot run. bv: the column tile width the caller's launch rule chose. A
// translation unit of its own, compiled beside the passes' (local_pass_cuda.cu).
#pragma once

#include "gdn/pass/pass_args.h"

namespace gdn::pass {

// Whether every register kernel runs at a's shape, on this device, in a's mode (pass::
// bf16_factors); where not in the bf16 mode's, notes why for the phase "prepare".
bool register_factors(const PassArgs<float>& a);
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
