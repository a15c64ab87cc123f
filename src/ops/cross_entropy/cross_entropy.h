// Cross-entropy of logits [N, V] against targets [N] (ids in [0, V), or kIgnoreTarget).
// cross_entropy checks the targets and returns the loss; cross_entropy_add sums the loss
// of many calls (a step's LM-head token blocks) in the device's memory, so the step reads
// it back, and learns of a bad target, with one copy at the end.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// A target that is not one (PyTorch's ignore_index): the token after a document's last
// token (train key `documents`). Its row adds 0 to the loss and gets zero dlogits.
inline constexpr std::int32_t kIgnoreTarget = -100;

// What cross_entropy_add calls sum, one element in Dev's memory (all zeros: nothing yet).
struct CrossEntropyTotal {
  double loss = 0;              // each call's rows summed in row order, added in call order
  std::int64_t bad_row = 0;     // with bad: the row of the first invalid target
  std::int32_t bad_target = 0;  // and that target
  std::int32_t bad = 0;         // 1 once a call met an invalid target
};

// Throws gdn::Error naming the first invalid target and its row, if `total` (on the host)
// holds one.
void check_targets(const CrossEntropyTotal& total, int V);

// cross_entropy returns the SUM over the N rows of -log softmax(logits)[target] (per-row
// losses in double, summed in row order, so the total does not depend on threads or
// devices); writes dlogits = (softmax - onehot) * grad_scale unless dlogits is null.
// dlogits may be logits (computed in place). A bad target throws (check_targets, rows
// counted from 0); dlogits may then have been written.
template <typename T>
double cross_entropy(Host, const T* logits, const std::int32_t* targets, std::int64_t N, int V,
                     double grad_scale, T* dlogits);
template <typename T>
double cross_entropy(Cuda, const T* logits, const std::int32_t* targets, std::int64_t N, int V,
                     double grad_scale, T* dlogits);

// cross_entropy_add: the same for rows [row0, row0 + N) of a longer run, with nothing
// copied to the host: the loss is added to total->loss (total in Dev's memory), and an
// invalid target throws nothing here: its row adds 0 and gets zero dlogits, and `total`
// keeps the first one (its row row0 + i) for check_targets once the run is done.
template <typename T>
void cross_entropy_add(Host, const T* logits, const std::int32_t* targets, std::int64_t N, int V,
                       double grad_scale, T* dlogits, std::int64_t row0, CrossEntropyTotal* total);
template <typename T>
void cross_entropy_add(Cuda, const T* logits, const std::int32_t* targets, std::int64_t N, int V,
                       double grad_scale, T* dlogits, std::int64_t row0, CrossEntropyTotal* total);

}  // namespace gdn::ops
