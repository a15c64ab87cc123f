// The shape, options and sequence layout of one gated-delta-rule call, and the raw views
// of its tensors. Layouts (docs/design.md §1): q, k [B, T, Hk, K]; v [B, T, Hv, V];
// g, beta [B, T, Hv]; states [N, Hv, K, V] with N sequences (N = B unless packed).
// Sequence lengths and token indices are int64 everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/precision.h"

namespace gdn {

// The chunk size every tool and config defaults to.
inline constexpr int kDefaultChunkSize = 64;

struct GdnProblem {
  GdnProblem() = default;
  GdnProblem(int B, std::int64_t T, int Hk, int Hv, int K, int V,
             int chunk_size = kDefaultChunkSize)
      : B(B), T(T), Hk(Hk), Hv(Hv), K(K), V(V), chunk_size(chunk_size) {}

  int B = 1;
  std::int64_t T = 0;
  int Hk = 1, Hv = 1, K = 64, V = 64;
  int chunk_size = kDefaultChunkSize;
  double scale = 0;        // 0 means 1/sqrt(K)
  bool l2norm_qk = false;  // normalise q and k inside the op (gradient flows through)
  // Precision::bf16: the CUDA passes' float GEMMs take bf16 operands (the model's bf16
  // mode, and the bf16 op's, gdn/op/bf16_op.h); the host's arithmetic is the same either way.
  Precision precision = Precision::plain;
  // Packed sequences (B must be 1): boundaries 0 = cu[0] <= cu[1] <= ... <= cu[N] = T
  // (equal neighbours: a zero-length sequence). Empty: every batch row is one sequence.
  std::vector<std::int64_t> cu_seqlens;

  int num_sequences() const {
    return cu_seqlens.empty() ? B : static_cast<int>(cu_seqlens.size()) - 1;
  }
  double scale_value() const { return scale != 0 ? scale : 1.0 / std::sqrt(double(K)); }
  int group() const { return Hv / Hk; }  // value heads per key head

  // Throws gdn::Error naming the bad value and what was expected.
  void validate() const;
  // validate(), then *this: for member initialiser lists.
  const GdnProblem& validated() const {
    validate();
    return *this;
  }
};

// Read-only views of the inputs. h0 may be null (zero initial state).
template <typename T>
struct GdnInputView {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const T* g = nullptr;
  const T* beta = nullptr;
  const T* h0 = nullptr;
};

// Outputs of the backward. dh0 may be null when there is no h0.
template <typename T>
struct GdnGradView {
  T* dq = nullptr;
  T* dk = nullptr;
  T* dv = nullptr;
  T* dg = nullptr;
  T* dbeta = nullptr;
  T* dh0 = nullptr;
};

}  // namespace gdn

namespace gdn {

// One sequence's token range [begin, end) in a batch row, and its index into h0 / ht.
struct SequenceRange {
  std::int64_t begin, end;
  int seq;
};

// The packed sequences with no tokens (their final state is their initial one).
inline std::vector<int> empty_sequences(const GdnProblem& p) {
  std::vector<int> out;
  for (std::size_t n = 0; n + 1 < p.cu_seqlens.size(); ++n)
    if (p.cu_seqlens[n] == p.cu_seqlens[n + 1]) out.push_back(int(n));
  return out;
}

inline std::vector<SequenceRange> sequences_of_row(const GdnProblem& p, int b) {
  std::vector<SequenceRange> out;
  if (p.cu_seqlens.empty()) {
    out.push_back({0, p.T, b});
  } else {
    for (std::size_t n = 0; n + 1 < p.cu_seqlens.size(); ++n)
      out.push_back({p.cu_seqlens[n], p.cu_seqlens[n + 1], static_cast<int>(n)});
  }
  return out;
}

}  // namespace gdn
