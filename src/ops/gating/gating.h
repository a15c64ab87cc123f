// The GDN gating per token and value head (N rows of H):
// beta = sigmoid(b);  g = -exp(A_log[h]) * softplus(a + dt_bias[h]). Double intermediates.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// gdn_gating_forward:  beta, g [N, H].
// gdn_gating_backward: db, da overwritten (either may be null); dA_log, ddt_bias [H] +=
// (either may be null).
template <typename T>
void gdn_gating_forward(Host, const T* b, const T* a, const T* A_log, const T* dt_bias,
                        std::int64_t N, int H, T* beta, T* g);
template <typename T>
void gdn_gating_forward(Cuda, const T* b, const T* a, const T* A_log, const T* dt_bias,
                        std::int64_t N, int H, T* beta, T* g);
template <typename T>
void gdn_gating_backward(Host, const T* b, const T* a, const T* A_log, const T* dt_bias,
                         const T* dbeta, const T* dg, std::int64_t N, int H, T* db, T* da,
                         T* dA_log, T* ddt_bias);
template <typename T>
void gdn_gating_backward(Cuda, const T* b, const T* a, const T* A_log, const T* dt_bias,
                         const T* dbeta, const T* dg, std::int64_t N, int H, T* db, T* da,
                         T* dA_log, T* ddt_bias);

}  // namespace gdn::ops
