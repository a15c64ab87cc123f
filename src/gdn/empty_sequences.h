// Zero-length packed sequences (cu_seqlens[n] == cu_seqlens[n + 1]) have no tokens, so no
// slice writes their states: their final state is their h0 (zero without one) and the
// gradient of their h0 is their dht. One rank (the single-rank op, or CP rank 0) writes
// them with these helpers.
#pragma once

#include "gdn/problem.h"

namespace gdn {

// dst[n] = src ? src[n] : 0 over the [Hv, K, V] blocks of the empty sequences n.
template <typename Dev, typename T>
void copy_empty_sequence_states(const GdnProblem& p, const T* src, T* dst) {
  const std::size_t block = std::size_t(p.Hv) * p.K * p.V;
  for (const int n : empty_sequences(p)) {
    if (src)
      Dev::copy(dst + n * block, src + n * block, block);
    else
      Dev::fill(dst + n * block, block, T(0));
  }
}

}  // namespace gdn
