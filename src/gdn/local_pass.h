// The chunked gated delta rule over one contiguous slice [t0, t1) of the sequence: the
// building block of both the single-rank op (the slice is everything) and context
// parallelism (DESIGN.md sections 3-4). No communication in here: the slice's entry
// state h_in and exit adjoint lambda come from the caller.
//
// The slice is split into segments at packed-sequence boundaries. A segment that starts
// a sequence begins from that sequence's h0 (or zero); only a first segment that
// continues a sequence from the previous slice depends on h_in.
#pragma once

#include <cstdint>
#include <vector>

#include "gdn/chunk.h"
#include "gdn/problem.h"
#include "gdn/slice_layout.h"

namespace gdn {

template <typename T>
class LocalPass {
 public:
  // p is the global problem; `in` holds this slice's tokens ([B, t1 - t0, H, D]), q and k
  // already L2-normalised if asked; in.h0, when set, is global [N, Hv, K, V]. The views
  // must outlive this object.
  LocalPass(const GdnProblem& p, std::int64_t t0, std::int64_t t1, const GdnTensors<T>& in);

  std::int64_t tokens() const { return layout_.tokens(); }

  // WY factors of every chunk, kept for the passes below (chunks are independent, so
  // this runs in parallel over chunks). transition() and adjoint() need it; output()
  // without it computes each chunk's factors on the fly, which is faster when nothing
  // reuses them (the single-rank op): the factors never leave the cache.
  void prepare();
  // Phase 1: the slice as one affine map h_out = M h_in + U, per (b, h):
  // M [B, Hv, K, K], U [B, Hv, K, V]. An empty slice is the identity (M = I, U = 0).
  void transition(T* M, T* U);
  // Phase 3: outputs o [B, t1 - t0, Hv, V] from the entry state h_in [B, Hv, K, V]
  // (null: zero). Keeps each chunk's entry state for backward(). ht, when set, gets the
  // final state of every sequence that ends in this slice (other rows untouched).
  void output(const T* h_in, T* o, T* ht);
  // Backward phase 1: D [B, Hv, K, V] = dLoss/dh_in with a zero exit adjoint (lambda = 0);
  // dht (global [N, Hv, K, V], may be null) applies where a sequence ends in the slice.
  void adjoint(const T* dO, const T* dht, T* D);
  // Backward phase 3 (after output()): gradients for this slice's tokens, given the
  // exit adjoint lambda [B, Hv, K, V] (null: zero). g.dq and g.dk are with respect to the
  // q and k given to the constructor. g.dh0 (global, may be null) gets the rows of the
  // sequences that start in this slice; other rows are untouched.
  void backward(const T* lambda, const T* dO, const T* dht, GdnGrads<T>& g);

 private:
  using Segment = SliceLayout::Segment;
  using Chunk = SliceLayout::Chunk;
  struct RowBuffers;  // per-thread gather buffers

  // Gathers chunk c of (batch, value head) bh into buf's input rows.
  void gather_rows(int bh, int c, RowBuffers& buf) const;

  int seq_of(const Segment& s, int b) const { return SliceLayout::seq_of(p_, s, b); }
  std::int64_t state_offset(int seq, int h) const {
    return (std::int64_t(seq) * p_.Hv + h) * p_.K * p_.V;
  }
  T* factors(int bh, int c) {
    return factors_.data() + (std::size_t(bh) * layout_.chunks.size() + c) * fsize_;
  }
  T* entry_state(int bh, int c) {
    return states_.data() + (std::size_t(bh) * layout_.chunks.size() + c) * p_.K * p_.V;
  }

  GdnProblem p_;
  SliceLayout layout_;
  GdnTensors<T> in_;
  T scale_;
  std::size_t fsize_;
  bool prepared_ = false;
  std::vector<T> factors_;  // [B * Hv, chunks, fsize], filled by prepare()
  std::vector<T> states_;   // [B * Hv, chunks, K, V], filled by output()
};

}  // namespace gdn
