#include "gdn/op/bf16_op.h"

#include "core/error.h"
#include "gdn/empty_sequences.h"
#include "ops/convert/convert.h"
#include "runtime/devices.h"

namespace gdn {

namespace {

template <typename Dev>
void widen_into(const Bf16* x, std::size_t n, Buffer<Dev, float>& out) {
  if (out.size() != n) out.resize(n);
  ops::to_float(Dev{}, x, std::int64_t(n), out.data());
}

}  // namespace

template <typename Dev>
ChunkedGdnBf16<Dev>::ChunkedGdnBf16(const GdnProblem& p, const Bf16Inputs& in)
    : p_(p.validated()), in_(in) {
  p_.precision = Precision::bf16;  // CUDA: the chunk GEMMs on bf16 tensor cores
  GDN_CHECK(in.q && in.k && in.v && in.beta && in.g,
            "ChunkedGdnBf16: q, k, v, beta and g must all be given (only h0 may be null)");
}

template <typename Dev>
const GdnInputView<float>& ChunkedGdnBf16<Dev>::widen() {
  const std::size_t rows = std::size_t(p_.B) * p_.T;
  widen_into<Dev>(in_.q, rows * p_.Hk * p_.K, q_);
  widen_into<Dev>(in_.k, rows * p_.Hk * p_.K, k_);
  widen_into<Dev>(in_.v, rows * p_.Hv * p_.V, v_);
  widen_into<Dev>(in_.beta, rows * p_.Hv, beta_);
  const GdnInputView<float> wide{q_.data(), k_.data(), v_.data(), in_.g, beta_.data(), in_.h0};
  norm_.normalize(p_, p_.T, wide);
  return norm_.view();
}

template <typename Dev>
void ChunkedGdnBf16<Dev>::release() {
  q_ = Buffer<Dev, float>(), k_ = Buffer<Dev, float>();
  v_ = Buffer<Dev, float>(), beta_ = Buffer<Dev, float>();
  norm_.release();
}

template <typename Dev>
GdnInputView<float> ChunkedGdnBf16<Dev>::bare() const {
  return {nullptr, nullptr, nullptr, in_.g, nullptr, in_.h0};
}

template <typename Dev>
Bf16Io ChunkedGdnBf16<Dev>::io(Bf16* o, const Bf16* dO) const {
  return {in_.q, in_.k, in_.v, in_.beta, dO, o, p_.l2norm_qk};
}

template <typename Dev>
void ChunkedGdnBf16<Dev>::forward(Bf16* o, float* ht) {
  pass_.reset(p_, 0, p_.T, bare());
  direct_ = pass_.makes_bf16_factors();
  if (direct_) {  // the register kernels read q, k, v, beta and write o as they are
    pass_.set_bf16_io(io(o, nullptr));
    pass_.output(nullptr, nullptr, ht);
    pass_.set_bf16_io({});
  } else {
    pass_.rebind(widen());
    const std::size_t n = std::size_t(p_.B) * p_.T * p_.Hv * p_.V;
    Buffer<Dev, float> o32(n);
    pass_.output(nullptr, o32.data(), ht);
    ops::to_bf16(Dev{}, o32.data(), std::int64_t(n), o);
  }
  if (ht) copy_empty_sequence_states<Dev>(p_, in_.h0, ht);
  // Keep the chunk entry states only: the factors (made on CUDA) and the float inputs go.
  pass_.release_factors();
  release();
}

template <typename Dev>
void ChunkedGdnBf16<Dev>::backward(const Bf16* dO, const float* dht, GdnGradView<float>& grads) {
  GDN_CHECK(pass_.makes_bf16_factors() == direct_,
            "ChunkedGdnBf16::backward: the register kernels ran in forward() but not here, or "
            "the other way round (train.cuda_walk or the device changed in between)");
  if (direct_) {  // pass_ still reads bare(), as forward() left it
    pass_.set_bf16_io(io(nullptr, dO));
    pass_.backward(nullptr, nullptr, dht, grads);  // and the norm's backward, where asked
    pass_.set_bf16_io({});
  } else {
    // The same float values as in forward(), so the kept entry states still hold.
    pass_.rebind(widen());
    const std::size_t n = std::size_t(p_.B) * p_.T * p_.Hv * p_.V;
    Buffer<Dev, float> dO32(n);
    ops::to_float(Dev{}, dO, std::int64_t(n), dO32.data());
    pass_.backward(nullptr, dO32.data(), dht, grads);
    norm_.backward(grads.dq, grads.dk);
  }
  if (grads.dh0) copy_empty_sequence_states<Dev>(p_, dht, grads.dh0);
  release();
}

template class ChunkedGdnBf16<Host>;
#if GDN_HAVE_CUDA
template class ChunkedGdnBf16<Cuda>;
#endif

}  // namespace gdn
