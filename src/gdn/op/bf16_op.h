// The single-rank GDN op in the bf16 storage mode: q, k, v, beta, the output o and its
// gradient dO are stored in bf16 (half the bytes of float, as fla and the Qwen3.5 models
// keep them); g, the states (h0, ht and the chunk entry states the backward needs) and
// every product and accumulator are float. Between forward() and backward() the op keeps
// only the chunk entry states (in bf16 where CUDA's register kernels run, as fla keeps h):
// the float copies of the inputs exist only while a call runs, so what a layer stores for
// its backward is its bf16 inputs plus those states. On
// CUDA, where the register kernels run (LocalPass::makes_bf16_factors), there are no float
// copies: the kernels read q, k, v, beta and dO and write o in bf16 (PassArgs::io), and
// normalise q and k themselves, with the bits of the float path.
//
// Numerics on the host: the float path on the bf16 values, then o rounded once to bf16. On
// CUDA the chunk GEMMs also take bf16 operands (tensor cores, fp32 sums: docs/design.md
// §2f), which adds bf16's rounding to every GEMM input. So against
// ChunkedGdn<float> on the same (bf16-representable) inputs, o differs by that rounding
// alone (relative 2^-9 per element) and the gradients by what dO's rounding carries; the
// tests state the tolerances (tests/unit/test_bf16.cpp).
#pragma once

#include "core/bf16.h"
#include "core/device.h"
#include "gdn/pass/local_pass.h"
#include "gdn/problem.h"
#include "gdn/qk_norm.h"

namespace gdn {

// The op's inputs in the bf16 mode, in the layouts of GdnInputView (problem.h).
struct Bf16Inputs {
  const Bf16* q = nullptr;
  const Bf16* k = nullptr;
  const Bf16* v = nullptr;
  const Bf16* beta = nullptr;
  const float* g = nullptr;
  const float* h0 = nullptr;  // may be null (zero initial state)
};

template <typename Dev = Host>
class ChunkedGdnBf16 {
 public:
  // The input views (Dev's memory) must outlive this object.
  ChunkedGdnBf16(const GdnProblem& p, const Bf16Inputs& in);
  // o [B, T, Hv, V] in bf16; ht [N, Hv, K, V] may be null.
  void forward(Bf16* o, float* ht);
  // Gradients of sum(o * dO) + sum(ht * dht) (dht may be null) w.r.t. the inputs as given
  // (q, k, v, beta widened from bf16), in float. After forward().
  void backward(const Bf16* dO, const float* dht, GdnGradView<float>& grads);

 private:
  // Float copies of the bf16 inputs in the buffers below, L2-normalised if asked: the view
  // the chunk math reads. release() frees them.
  const GdnInputView<float>& widen();
  void release();
  // The view of the inputs with only g and h0 (the register kernels read the rest in bf16),
  // and the bf16 tensors for them (LocalPass::set_bf16_io).
  GdnInputView<float> bare() const;
  Bf16Io io(Bf16* o, const Bf16* dO) const;

  GdnProblem p_;
  Bf16Inputs in_;
  Buffer<Dev, float> q_, k_, v_, beta_;
  QKNormalizer<float, Dev> norm_;
  LocalPass<float, Dev> pass_;
  // forward() ran on the register kernels straight from the bf16 tensors (CUDA, where
  // LocalPass makes bf16 factors): no widened copies of q, k, v, beta, o or dO.
  bool direct_ = false;
};

}  // namespace gdn
