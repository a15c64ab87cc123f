// Token embedding, y[i, :] = E[tokens[i], :] with E [vocab, d], and its backward.
// Token ids are checked before anything is computed: an id outside [0, vocab) throws
// gdn::Error naming it and its row (the CUDA version copies the ids to the host for that).
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// embedding_forward:  y[N, d] = E[tokens[i], :], E [vocab, d].
// embedding_backward: dE[tokens[i], :] += dy[i, :]; repeated tokens add in row order.
#define GDN_EMBEDDING_OPS(PREFIX, Dev, T)                                                      \
  PREFIX void embedding_forward(Dev, const std::int32_t* tokens, const T* E, std::int64_t N,   \
                                int vocab, int d, T* y);                                       \
  PREFIX void embedding_backward(Dev, const std::int32_t* tokens, const T* dy, std::int64_t N, \
                                 int vocab, int d, T* dE);
GDN_DECLARE_ON_DEVICES(GDN_EMBEDDING_OPS)

}  // namespace gdn::ops
