#include "gdn/op/op.h"

#include "gdn/empty_sequences.h"
#include "runtime/devices.h"

namespace gdn {

template <typename T, typename Dev>
ChunkedGdn<T, Dev>::ChunkedGdn(const GdnProblem& p, const GdnInputView<T>& in)
    : p_(p.validated()), norm_(p_, p_.T, in), pass_(p_, 0, p_.T, norm_.view()) {}

template <typename T, typename Dev>
void ChunkedGdn<T, Dev>::forward(T* o, T* ht) {
  // No prepare(): nothing reuses the factors here, so output() makes them chunk by chunk
  // where the device can.
  pass_.output(nullptr, o, ht);
  if (ht) copy_empty_sequence_states<Dev>(p_, norm_.view().h0, ht);
}

template <typename T, typename Dev>
void ChunkedGdn<T, Dev>::backward(const T* dO, const T* dht, GdnGradView<T>& grads) {
  pass_.backward(nullptr, dO, dht, grads);
  if (grads.dh0) copy_empty_sequence_states<Dev>(p_, dht, grads.dh0);
  norm_.backward(grads.dq, grads.dk);
}

#define GDN_INSTANTIATE(T, Dev) template class ChunkedGdn<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
