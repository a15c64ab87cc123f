// The token-by-token gated delta rule (docs/design.md §1) and its hand-written
// backward: slow, obviously right, the oracle every faster path is tested against.
#pragma once

#include <type_traits>

#include "gdn/problem.h"

namespace gdn {

// o [B, T, Hv, V]; ht [N, Hv, K, V] may be null.
template <typename T>
// (type_identity keeps T deduced from the tensors, so nullptr can be passed for ht.)
void recurrent_forward(const GdnProblem& p, const GdnInputView<T>& in, T* o,
                       std::type_identity_t<T>* ht);

// Gradients of sum(o * dO) + sum(ht * dht) (dht may be null) with respect to the inputs
// as given (q and k before the optional L2 norm). grads.dh0 is written when in.h0 is set.
template <typename T>
void recurrent_backward(const GdnProblem& p, const GdnInputView<T>& in, const T* dO,
                        const std::type_identity_t<T>* dht, GdnGradView<T>& grads);

}  // namespace gdn
