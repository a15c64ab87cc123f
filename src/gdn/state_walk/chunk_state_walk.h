// The state walk over one chunk (docs/design.md §2), after fla's chunk_fwd_h: the step
// h <- gamma h + k~^T (u - w h) with the chunk's outputs where asked, and the transition
// M <- gamma M - k~^T (w M), each on column tiles of the state. ChunkKernel's bodies for
// any Exec; the GPU's tiled walks are state_walk_tiled.h, the bf16 mode's register walks
// state_walk_bf16.h.
#pragma once

#include "gdn/chunk/chunk_kernel.h"

namespace gdn {

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::step(const T* f, T* h, T* o) {
  step_cols(f, 0, V_, h, V_, o, V_, vnew_);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::compose(const T* f, T* M) {
  compose_cols(f, K_, M, K_, tmpCK_);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::step_cols(const T* f, int c0, int n, T* h, int ldh, T* o, int ldo,
                                            T* vnew) {
  const int C = C_, K = K_, V = V_;
  const T* u = fl_.u(f) + c0;
  if (n == V) {  // the whole width: one flat copy (the full-width step's loop)
    for (int x = ex_.tid(); x < C * V; x += ex_.nthreads()) vnew[x] = u[x];
  } else {
    each2d(C, n, [&](int i, int d) { vnew[i * n + d] = u[i * V + d]; });
  }
  ex_.gemm(false, false, C, n, K, T(-1), fl_.w(f), K, h, ldh, T(1), vnew, n);  // u - w h
  if (o) {
    ex_.gemm(false, false, C, n, K, s_, fl_.qg(f), K, h, ldh, T(0), o, ldo);
    ex_.gemm(false, false, C, n, C, s_, fl_.P(f), C, vnew, n, T(1), o, ldo, Structure::kLowerA);
  }
  ex_.gemm(true, false, K, n, C, T(1), fl_.kt(f), K, vnew, n, fl_.gamma(f), h, ldh);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::compose_cols(const T* f, int n, T* M, int ldm, T* wm) {
  const int C = C_, K = K_;
  ex_.gemm(false, false, C, n, K, T(1), fl_.w(f), K, M, ldm, T(0), wm, n);  // w M
  ex_.gemm(true, false, K, n, C, T(-1), fl_.kt(f), K, wm, n, fl_.gamma(f), M, ldm);
}

}  // namespace gdn
