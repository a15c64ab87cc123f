#include "gdn/op.h"

#include <vector>

namespace gdn {

template <typename T>
ChunkedGdn<T>::ChunkedGdn(const GdnProblem& p, const GdnTensors<T>& in)
    : p_(p.validated()), norm_(p_, p_.T, in), pass_(p_, 0, p_.T, norm_.view()) {}

template <typename T>
void ChunkedGdn<T>::forward(T* o, T* ht) {
  // No prepare(): nothing reuses the factors here, so output() makes them chunk by chunk.
  pass_.output(nullptr, o, ht);
}

template <typename T>
void ChunkedGdn<T>::backward(const T* dO, const T* dht, GdnGrads<T>& grads) {
  pass_.backward(nullptr, dO, dht, grads);
  norm_.backward(grads.dq, grads.dk);
}

template class ChunkedGdn<float>;
template class ChunkedGdn<double>;

}  // namespace gdn
