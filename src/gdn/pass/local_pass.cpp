#include "gdn/pass/local_pass.h"

#include <type_traits>

#include "core/error.h"
#include "gdn/chunk/bf16_factors.h"
#include "gdn/chunk/chunk_kernel.h"
#include "gdn/chunk/launch_counts.h"
#include "runtime/devices.h"

namespace gdn {

namespace {

// The layout depends on the slice, the chunk size and the sequence boundaries only.
bool same_layout(const GdnProblem& a, const GdnProblem& b) {
  return a.T == b.T && a.chunk_size == b.chunk_size && a.cu_seqlens == b.cu_seqlens;
}

}  // namespace

template <typename T, typename Dev>
void LocalPass<T, Dev>::reset(const GdnProblem& p, std::int64_t t0, std::int64_t t1,
                              const GdnInputView<T>& in) {
  const bool keep = layout_ && layout_->t0 == t0 && layout_->t1 == t1 && same_layout(p, p_);
  p_ = p;
  in_ = in;
  prepared_ = bf16_factors_ = false;
  if (states_of_ == States::inputs) states_of_ = States::none;  // the inputs changed
  if (keep) return;
  states_of_ = States::none;  // another slice: the kept states are not its chunks'
  layout_.emplace(p, t0, t1);
  segments_ = to_device<Dev>(layout_->segments.data(), layout_->segments.size());
  chunks_ = to_device<Dev>(layout_->chunks.data(), layout_->chunks.size());
}

template <typename T, typename Dev>
PassArgs<T> LocalPass<T, Dev>::args() {
  GDN_CHECK(layout_.has_value(), "LocalPass: reset() was not called");
  const SliceLayout& l = *layout_;
  PassArgs<T> a{p_.B,
                p_.Hk,
                p_.Hv,
                p_.K,
                p_.V,
                p_.chunk_size,
                p_.group(),
                !p_.cu_seqlens.empty(),
                l.tokens(),
                std::int64_t(l.segments.size()),
                std::int64_t(l.chunks.size()),
                segments_.data(),
                chunks_.data(),
                in_,
                T(p_.scale_value()),
                factor_size(bf16_factors_),
                factors_.data(),
                prepared_,
                states_.data(),
                nullptr,
                nullptr,
                pass::chunk_gemm<T>(p_.precision),
                bf16_factors_,
                bf16_factors_ ? io_ : Bf16Io{}};
  const std::size_t ws = pass::workspace_elems(Dev{}, a);
  if (workspace_.size() < ws) workspace_.resize(ws);
  a.workspace = workspace_.data();
  return a;
}

template <typename T, typename Dev>
std::size_t LocalPass<T, Dev>::factor_size(bool bf16) const {
  return bf16 ? Bf16Factors{p_.chunk_size, p_.K, p_.V}.floats()
              : ChunkFactors<T>{p_.chunk_size, p_.K, p_.V}.size();
}

template <typename T, typename Dev>
std::size_t LocalPass<T, Dev>::factor_elems() const {
  return std::size_t(p_.B) * p_.Hv * layout_->chunks.size() * factor_size(bf16_factors_);
}

template <typename T, typename Dev>
std::size_t LocalPass<T, Dev>::state_elems(bool bf16) const {
  const std::size_t n = std::size_t(p_.B) * p_.Hv * layout_->chunks.size() * p_.K * p_.V;
  return bf16 ? (n + 1) / 2 : n;
}

template <typename T, typename Dev>
bool LocalPass<T, Dev>::makes_bf16_factors() {
  if constexpr (std::is_same_v<T, float>) {
    PassArgs<T> a = args();
    a.bf16_factors = false;
    return pass::bf16_factors(Dev{}, a);
  } else {
    return false;
  }
}

template <typename T, typename Dev>
void LocalPass<T, Dev>::prepare() {
  bf16_factors_ = makes_bf16_factors();
  const std::size_t n = factor_elems();
  if (factors_.size() != n) factors_.resize(n);
  pass::prepare(Dev{}, args());
  prepared_ = true;
}

template <typename T, typename Dev>
void LocalPass<T, Dev>::transition(T* M, T* U) {
  if (!prepared_ && pass::needs_prepare(Dev{})) prepare();
  pass::transition(Dev{}, args(), M, U);
}

template <typename T, typename Dev>
void LocalPass<T, Dev>::output(const T* h_in, T* o, T* ht) {
  if (!prepared_ && pass::needs_prepare(Dev{})) prepare();
  const std::size_t n = state_elems(bf16_factors_);  // the factors' form is the states'
  if (states_.size() != n) states_.resize(n);
  pass::output(Dev{}, args(), h_in, o, ht);
  states_of_ = States::inputs;
  states_bf16_ = bf16_factors_;
}

template <typename T, typename Dev>
void LocalPass<T, Dev>::output_from_states(T* o, T* ht) {
  GDN_CHECK(layout_.has_value(), "LocalPass: reset() was not called");
  GDN_CHECK(states_of_ != States::none,
            "LocalPass::output_from_states without kept chunk entry states of slice [", layout_->t0,
            ", ", layout_->t1, "): call output(), then release(Keep::replay)");
  const std::size_t n = state_elems(states_bf16_);
  GDN_CHECK(states_.size() == n, "LocalPass::output_from_states: the kept states hold ",
            states_.size(), " elements, but B = ", p_.B, ", Hv = ", p_.Hv, ", K = ", p_.K,
            ", V = ", p_.V, " and ", layout_->chunks.size(), " chunks need ", n);
  if (states_bf16_) {
    // Kept in bf16 by the register kernels: their prepare and outputs read them so.
    GDN_CHECK(makes_bf16_factors(),
              "LocalPass::output_from_states: the entry states were kept in bf16 by the register "
              "kernels, which cannot run now (was train.cuda_walk or the bf16 mode changed?)");
    if (!prepared_ || !bf16_factors_) prepare();
  } else if (bf16_factors_) {
    prepared_ = false;  // states in T: the tiled chunk jobs make ChunkFactors blocks
  }
  // Unprepared, the CUDA pass makes the factors into the factor buffer as it goes
  // (pass_args.h).
  const bool makes_factors = !prepared_ && pass::needs_prepare(Dev{});
  if (makes_factors) bf16_factors_ = false;  // the chunk jobs make ChunkFactors blocks
  if (makes_factors && factors_.size() != factor_elems()) factors_.resize(factor_elems());
  pass::output_from_states(Dev{}, args(), o, ht);
  prepared_ = prepared_ || makes_factors;
  states_of_ = States::inputs;
}

template <typename T, typename Dev>
void LocalPass<T, Dev>::adjoint(const T* dO, const T* dht, T* D) {
  GDN_CHECK(prepared_, "LocalPass::adjoint called before prepare()");
  pass::adjoint(Dev{}, args(), dO, dht, D);
}

template <typename T, typename Dev>
void LocalPass<T, Dev>::backward(const T* lambda, const T* dO, const T* dht, GdnGradView<T>& g) {
  GDN_CHECK(states_of_ == States::inputs,
            "LocalPass::backward without an output() on this reset's inputs: the chunk entry "
            "states are ",
            states_of_ == States::none ? "missing" : "kept for output_from_states() only");
  const std::size_t n =
      std::size_t(p_.B) * tokens() * p_.Hk * p_.K * pass::grad_scratch_heads(Dev{}, p_.group());
  // dq, dk per value head, summed per key head: held only while this backward runs.
  PassBuffer<Dev, T> dqv(n), dkv(n);
  // The CUDA backward walks the adjoint on the factors, keeps every chunk's exit adjoint
  // (as many elements as the entry states) for the chunk-parallel part, and drops them on
  // return: held only while this layer's backward runs (from the device's pool, so no
  // cudaMalloc once the pool is warm).
  PassBuffer<Dev, T> exits;
  if (pass::chunk_parallel_backward(Dev{})) {
    if (!prepared_) prepare();
    GDN_CHECK(
        bf16_factors_ == states_bf16_, "LocalPass::backward: the forward kept its entry states ",
        states_bf16_ ? "in bf16 for the register kernels" : "in full precision",
        " but this backward runs ", bf16_factors_ ? "the register kernels" : "the tiled kernels",
        " (was train.cuda_walk or the bf16 mode changed between forward and backward?)");
    exits.resize(state_elems(bf16_factors_));
  }
  PassArgs<T> a = args();
  a.adjoints = exits.data();
  pass::backward(Dev{}, a, lambda, dO, dht, g, dqv.data(), dkv.data());
}

#define GDN_INSTANTIATE(T, Dev) template class LocalPass<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
