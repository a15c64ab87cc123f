// The single-rank chunked gated delta rule: the whole sequence is one slice, on any device.
// Same interface as the recurrence (gdn/recurrent.h), so tests compare them directly.
#pragma once

#include <type_traits>

#include "core/device.h"
#include "gdn/pass/local_pass.h"
#include "gdn/problem.h"
#include "gdn/qk_norm.h"

namespace gdn {

// Forward, then (optionally) backward reusing what the forward kept. Pointers live in
// Dev's memory.
template <typename T, typename Dev = Host>
class ChunkedGdn {
 public:
  // The input views must outlive this object.
  ChunkedGdn(const GdnProblem& p, const GdnInputView<T>& in);
  // o [B, T, Hv, V]; ht [N, Hv, K, V] may be null.
  void forward(T* o, T* ht);
  // Gradients of sum(o * dO) + sum(ht * dht) (dht may be null) w.r.t. the inputs as given.
  void backward(const T* dO, const T* dht, GdnGradView<T>& grads);

 private:
  GdnProblem p_;
  QKNormalizer<T, Dev> norm_;
  LocalPass<T, Dev> pass_;
};

template <typename T>
void chunk_forward(const GdnProblem& p, const GdnInputView<T>& in, T* o,
                   std::type_identity_t<T>* ht) {
  ChunkedGdn<T>(p, in).forward(o, ht);
}

}  // namespace gdn
