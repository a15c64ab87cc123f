// The GDN core of one model layer (docs/design.md §3-5, §5d): the gated delta rule over
// the layer's B rows with context parallelism, for a whole batch or for packed documents.
// Without documents it is one GdnContextParallel over the B rows; with them (cp.documents)
// each row is a packed problem of its own, whose documents are its sequences, run by a
// GdnContextParallel per row. The caller sees one forward and one backward either way.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/lifecycle.h"
#include "cp/cp_context.h"
#include "cp/gdn_cp.h"
#include "gdn/problem.h"

namespace gdn {

// What the core holds on one rank, in elements of T (the memory estimate's share of it).
struct GdnCoreElems {
  std::int64_t kept = 0;       // from a layer's forward to its backward
  std::int64_t replayed = 0;   // of those, what a recomputing layer keeps (Keep::replay)
  std::int64_t transient = 0;  // only while the layer's forward or backward runs
};

// What a GdnLayerCore holds on a rank of a cp group of P ranks whose shard has p.T tokens
// per row (the estimate's shard: [0, p.T)), with `threads` OpenMP threads deciding the
// intra-rank split: normalised q and k, every chunk's entry state, the shard's entry state, what
// the pair scan keeps at P > 1 (kept and replayed: every rank's pair, or with log_depth
// this rank's M); while a layer runs, the WY factors when P > 1 or the automatic split
// cuts the shard, the scan's scratch, and the backward's dq, dk per value head.
GdnCoreElems gdn_core_elems(const GdnProblem& p, int P, PairScan scan, int threads);

template <typename T, typename Dev>
class GdnLayerCore {
 public:
  // p: the layer's problem over the B rows of cp.T_global tokens (p.cu_seqlens empty; the
  // documents come from cp). in: this shard's [B, Tl, H, D] inputs, valid until
  // backward(). o: this shard's outputs [B, Tl, Hv, V].
  void forward(const CpContext& cp, const GdnProblem& p, const GdnInputView<T>& in, T* o);
  // d_o: this shard's output gradient; g: this shard's input gradients (g.dh0 unused).
  void backward(const CpContext& cp, const T* d_o, GdnGradView<T>& g);
  // GdnContextParallel::rebind and release_inputs on every row's core: the backward reads
  // the forward's inputs (the same values) from `in` instead.
  void rebind(const GdnInputView<T>& in);
  void release_inputs() {
    for (auto& core : cores_) core->release_inputs();
  }
  // GdnContextParallel::release on every row's core.
  void release(Keep keep) {
    for (auto& core : cores_) core->release(keep);
  }

 private:
  // cores_[0] for the whole batch, or one per row with documents (kept for the run).
  std::vector<std::unique_ptr<GdnContextParallel<T, Dev>>> cores_;
  bool per_row_ = false;  // the last forward ran one core per row
  // With documents: the elements of one row of q / k, v / o and g / beta on this shard.
  struct RowElems {
    std::int64_t qk = 0, v = 0, h = 0;
  } row_;
  // Row b's part of the inputs (with documents).
  GdnInputView<T> row_view(const GdnInputView<T>& in, int b) const {
    return {in.q + b * row_.qk, in.k + b * row_.qk,   in.v + b * row_.v,
            in.g + b * row_.h,  in.beta + b * row_.h, nullptr};
  }
};

}  // namespace gdn
