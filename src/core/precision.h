// How a float path multiplies and stores: the model's numeric mode (train.dtype). In
// Precision::bf16, bf16 mixed precision as torch.autocast does it: the model's matmuls take
// bf16 operands (their inputs rounded to bf16, products and sums in float) and the mixers
// round what a bf16 model stores (the GDN op's q, k, v, beta and output, attention's q, k,
// v and output) to bf16 values. Everything else (norms, softmax, the router,
// cross-entropy, gradients, the optimizer) stays float. A double path in Precision::bf16
// rounds the same values (the bf16 path's fp64 model, for exact tests) but stores doubles.
//
// A value, passed to every op whose numerics depend on it (the first argument after the
// device tag): the model's layers hold the mode they were made with (ModelOptions), so
// nothing depends on which thread calls, and an OpenMP worker or a CUDA launch sees what
// it is given.
#pragma once

namespace gdn {

enum class Precision {
  plain,  // T's own arithmetic
  bf16,   // float paths with bf16 operands and storage, as above
};

inline Precision precision_of(bool bf16) {
  return bf16 ? Precision::bf16 : Precision::plain;
}

}  // namespace gdn
