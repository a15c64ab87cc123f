// The passes of LocalPass (gdn/pass/local_pass.h) on each device: local_pass_host.cpp
// and local_pass_cuda.cu define them; the CUDA ones only sequence the phases' launches
// (gdn/<phase>/<phase>_cuda.h).
#pragma once

#include <cstddef>

#include "core/device.h"
#include "gdn/chunk/pass_args.h"

namespace gdn {
// The passes of LocalPass on one device, same meaning as its members; backward gets
// scratch dqv, dkv of grad_scratch_heads(Dev, G) x [B, Tl, Hk, K] elements each.
// output_from_states reads a.states; where !a.prepared it makes each chunk's factors
// itself: in scratch on the host, into a.factors on CUDA (which needs_prepare).
// workspace_elems is how much scratch the device's passes want in PassArgs::workspace.
namespace pass {
// Per-value-head blocks of dq / dk scratch the backward needs: the CUDA pass writes all G
// and sums them; the host pass writes the first head of each group straight into dq, dk
// and adds the other G - 1 in order (the same sums, without a copy when G = 1).
inline int grad_scratch_heads(Host, int G) {
  return G - 1;
}
int grad_scratch_heads(Cuda, int G);
// Whether prepare() writes Bf16Factors blocks for these arguments: on CUDA in the bf16 mode
// (float passes in Precision::bf16) where every register kernel can run (the
// shape, the device's shared memory, no train.cuda_walk tiled); never on the host.
template <typename T>
bool bf16_factors(Host, const PassArgs<T>&) {
  return false;
}
template <typename T>
bool bf16_factors(Cuda, const PassArgs<T>& a);
// Whether transition() and output() need prepare() first: the host can make each chunk's
// factors on the fly; the CUDA passes read them from the factor buffer.
inline bool needs_prepare(Host) {
  return false;
}
bool needs_prepare(Cuda);
// Whether backward() runs as a sequential adjoint walk that stores every chunk's exit
// adjoint (PassArgs::adjoints, B Hv K V elements per chunk, allocated by LocalPass for the
// call) followed by one independent job per chunk; it needs the WY factors (prepare()).
// The host keeps its fused walk (the chunk's backward carries the adjoint itself).
inline bool chunk_parallel_backward(Host) {
  return false;
}
bool chunk_parallel_backward(Cuda);

template <typename T>
std::size_t workspace_elems(Host, const PassArgs<T>& a);
template <typename T>
std::size_t workspace_elems(Cuda, const PassArgs<T>& a);
template <typename T>
void prepare(Host, const PassArgs<T>& a);
template <typename T>
void prepare(Cuda, const PassArgs<T>& a);
template <typename T>
void transition(Host, const PassArgs<T>& a, T* M, T* U);
template <typename T>
void transition(Cuda, const PassArgs<T>& a, T* M, T* U);
template <typename T>
void output(Host, const PassArgs<T>& a, const T* h_in, T* o, T* ht);
template <typename T>
void output(Cuda, const PassArgs<T>& a, const T* h_in, T* o, T* ht);
template <typename T>
void output_from_states(Host, const PassArgs<T>& a, T* o, T* ht);
template <typename T>
void output_from_states(Cuda, const PassArgs<T>& a, T* o, T* ht);
template <typename T>
void adjoint(Host, const PassArgs<T>& a, const T* dO, const T* dht, T* D);
template <typename T>
void adjoint(Cuda, const PassArgs<T>& a, const T* dO, const T* dht, T* D);
template <typename T>
void backward(Host, const PassArgs<T>& a, const T* lambda, const T* dO, const T* dht,
              GdnGradView<T>& g, T* dqv, T* dkv);
template <typename T>
void backward(Cuda, const PassArgs<T>& a, const T* lambda, const T* dO, const T* dht,
              GdnGradView<T>& g, T* dqv, T* dkv);
}  // namespace pass

}  // namespace gdn
