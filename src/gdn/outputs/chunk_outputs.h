// One chunk's outputs from its entry state (docs/design.md §2), after fla's chunk_fwd_o:
// o = s (q_g h + P (u - w h)), the step's first three GEMMs (chunk_state_walk.h) without
// its state update. ChunkKernel's body for any Exec; the GPU's fp32 kernels are
// outputs_cuda.cu, the bf16 mode's outputs_bf16.h.
#pragma once

#include "gdn/chunk/chunk_kernel.h"

namespace gdn {

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::outputs(const T* f, const T* h, T* o) {
  const int C = C_, K = K_, V = V_;
  const T* u = fl_.u(f);
  for (int x = ex_.tid(); x < C * V; x += ex_.nthreads()) vnew_[x] = u[x];
  ex_.gemm(false, false, C, V, K, T(-1), fl_.w(f), K, h, V, T(1), vnew_, V);  // u - w h
  ex_.gemm(false, false, C, V, K, s_, fl_.qg(f), K, h, V, T(0), o, V);
  ex_.gemm(false, false, C, V, C, s_, fl_.P(f), C, vnew_, V, T(1), o, V, Structure::kLowerA);
}

}  // namespace gdn
