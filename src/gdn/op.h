// The single-rank chunked gated delta rule: the whole sequence is one slice.
// Same interface as the recurrence (gdn/recurrent.h), so tests compare them directly.
#pragma once

#include <type_traits>

#include "gdn/l2norm.h"
#include "gdn/local_pass.h"
#include "gdn/problem.h"

namespace gdn {

// Forward, then (optionally) backward reusing what the forward kept.
template <typename T>
class ChunkedGdn {
 public:
  // The input views must outlive this object.
  ChunkedGdn(const GdnProblem& p, const GdnTensors<T>& in);
  // o [B, T, Hv, V]; ht [N, Hv, K, V] may be null.
  void forward(T* o, T* ht);
  // Gradients of sum(o * dO) + sum(ht * dht) (dht may be null) w.r.t. the inputs as given.
  void backward(const T* dO, const T* dht, GdnGrads<T>& grads);

 private:
  GdnProblem p_;
  QKNormalizer<T> norm_;
  LocalPass<T> pass_;
};

template <typename T>
void chunk_forward(const GdnProblem& p, const GdnTensors<T>& in, T* o,
                   std::type_identity_t<T>* ht) {
  ChunkedGdn<T>(p, in).forward(o, ht);
}

}  // namespace gdn
