// Cross-entropy of logits [N, V] against targets [N] (ids in [0, V), or kIgnoreTarget;
// checked first: a bad target throws gdn::Error naming it and its row).
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// A target that is not one (PyTorch's ignore_index): the token after a document's last
// token (train key `documents`). Its row adds 0 to the loss and gets zero dlogits.
inline constexpr std::int32_t kIgnoreTarget = -100;

// cross_entropy returns the SUM over the N rows of -log softmax(logits)[target] (per-row
// losses in double, summed in row order on the host, so the total does not depend on
// threads or devices); writes dlogits = (softmax - onehot) * grad_scale unless dlogits is
// null. dlogits may be logits (computed in place).
template <typename T>
double cross_entropy(Host, const T* logits, const std::int32_t* targets, std::int64_t N, int V,
                     double grad_scale, T* dlogits);
template <typename T>
double cross_entropy(Cuda, const T* logits, const std::int32_t* targets, std::int64_t N, int V,
                     double grad_scale, T* dlogits);

}  // namespace gdn::ops
