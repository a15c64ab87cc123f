// The GDN gating per token and value head (N rows of H):
// beta = sigmoid(b);  g = -exp(A_log[h]) * softplus(a + dt_bias[h]). Double intermediates.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// gdn_gating_forward:  beta, g [N, H].
// gdn_gating_backward: db, da overwritten (either may be null); dA_log, ddt_bias [H] +=
// (either may be null).
#define GDN_GATING_OPS(PREFIX, Dev, T)                                                           \
  PREFIX void gdn_gating_forward(Dev, const T* b, const T* a, const T* A_log, const T* dt_bias,  \
                                 std::int64_t N, int H, T* beta, T* g);                          \
  PREFIX void gdn_gating_backward(Dev, const T* b, const T* a, const T* A_log, const T* dt_bias, \
                                  const T* dbeta, const T* dg, std::int64_t N, int H, T* db,     \
                                  T* da, T* dA_log, T* ddt_bias);
GDN_DECLARE_ON_DEVICES(GDN_GATING_OPS)

}  // namespace gdn::ops
