// bf16 mixed precision as a mode of the calling thread, as torch.autocast does it: inside a
// Bf16Autocast scope the model's matmuls take bf16 operands (their inputs rounded to bf16,
// products and sums in float) and the mixers round what a bf16 model stores (the GDN
// op's q, k, v, beta and output, attention's q, k, v and output) to bf16 values. Everything
// else (norms, softmax, the router, cross-entropy, gradients, the optimizer) stays float.
//
// A thread-local mode, not a parameter, because it spans every layer of a forward and
// backward the way autocast does. Ops read it on the calling thread before they fork
// OpenMP workers, which do not inherit it.
#pragma once

namespace gdn {

namespace autocast_detail {
inline thread_local bool bf16 = false;
}  // namespace autocast_detail

// Whether the calling thread is inside a Bf16Autocast(true) scope.
inline bool bf16_autocast() {
  return autocast_detail::bf16;
}

// Sets the mode for its lifetime, then restores the one before (scopes nest: the router
// runs in an `on = false` scope inside the model's `on = true` one).
class Bf16Autocast {
 public:
  explicit Bf16Autocast(bool on) : before_(autocast_detail::bf16) { autocast_detail::bf16 = on; }
  ~Bf16Autocast() { autocast_detail::bf16 = before_; }
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool before_;
};

}  // namespace gdn
