// Token embedding, y[i, :] = E[tokens[i], :] with E [vocab, d], and its backward.
// Token ids are checked before anything is computed: an id outside [0, vocab) throws
// gdn::Error naming it and its row (the CUDA version copies the ids to the host for that).
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// embedding_forward:  y[N, d] = E[tokens[i], :], E [vocab, d].
// embedding_backward: dE[tokens[i], :] += dy[i, :]; repeated tokens add in row order.
template <typename T>
void embedding_forward(Host, const std::int32_t* tokens, const T* E, std::int64_t N, int vocab,
                       int d, T* y);
template <typename T>
void embedding_forward(Cuda, const std::int32_t* tokens, const T* E, std::int64_t N, int vocab,
                       int d, T* y);
template <typename T>
void embedding_backward(Host, const std::int32_t* tokens, const T* dy, std::int64_t N, int vocab,
                        int d, T* dE);
template <typename T>
void embedding_backward(Cuda, const std::int32_t* tokens, const T* dy, std::int64_t N, int vocab,
                        int d, T* dE);

}  // namespace gdn::ops
