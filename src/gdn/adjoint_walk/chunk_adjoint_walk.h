// The adjoint walk over one chunk (docs/design.md §2b, §4), after fla's chunk_bwd_dhu:
// mu <- gamma mu + s q_g^T dO - w^T (k~ mu + s P^T dO), on column tiles of the adjoint.
// ChunkKernel's bodies for any Exec; the GPU's tiled walks are adjoint_walk_tiled.h, the
// bf16 mode's register walks adjoint_walk_bf16.h.
#pragma once

#include "gdn/chunk/chunk_kernel.h"

namespace gdn {

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::adjoint(const T* f, T* mu, const T* dO) {
  adjoint_cols(f, V_, mu, V_, dO, V_, dvn_);
}

template <typename T, typename Exec>
GDN_HD void ChunkKernel<T, Exec>::adjoint_cols(const T* f, int n, T* mu, int ldmu, const T* dO,
                                               int lddo, T* dvn) {
  const int C = C_, K = K_;
  // dv_new = k~ mu + s P^T dO;  mu <- gamma mu + s q_g^T dO - w^T dv_new
  ex_.gemm(false, false, C, n, K, T(1), fl_.kt(f), K, mu, ldmu, T(0), dvn, n);
  ex_.gemm(true, false, C, n, C, s_, fl_.P(f), C, dO, lddo, T(1), dvn, n, Structure::kUpperA);
  ex_.gemm(true, false, K, n, C, s_, fl_.qg(f), K, dO, lddo, fl_.gamma(f), mu, ldmu);
  ex_.gemm(true, false, K, n, C, T(-1), fl_.w(f), K, dvn, n, T(1), mu, ldmu);
}

}  // namespace gdn
