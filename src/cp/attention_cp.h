// Causal softmax attention with context parallelism on the contiguous shards the GDN
// layers need (docs/design.md §5b): the sequence is never reordered globally.
//
// Forward:  1. all-gather K and V (after RoPE at global positions) -> the whole sequence;
//           2. attention of the query rows this rank computes over keys 0..position;
//           with layer_local balance, the query rows are first moved by an all-to-all
//           into a zigzag set of chunks (rank r takes chunks r and 2P-1-r of 2P), so every
//           rank does an equal share of the causal triangle, and the outputs go back.
// Backward: the mirror: dO to the query layout, attention backward, dQ back; dK and dV
//           of the whole sequence are summed over the ranks onto their owners
//           (reduce-scatter).
// Its exchange grows with T (the K, V of every token), unlike the GDN layers' fixed-size
// pairs; the counters of the call sites below show both. On either device: the
// communicator takes Dev's buffers, and rows move by copies and gathers in Dev's memory.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/lifecycle.h"
#include "core/precision.h"
#include "cp/cp_context.h"
#include "ops/convert/kept.h"

namespace gdn {

struct AttentionDims {
  int B = 1;
  int Hq = 1, Hkv = 1, D = 1;
  double scale = 1.0;
  // Precision::bf16: q, k, v and o are bf16 values (the mixer rounds them), the gathered
  // K, V travel and are kept as bf16, and the CUDA op takes its bf16 kernels.
  Precision precision = Precision::plain;
};

// The query rows rank r computes: its shard, or with layer_local balance chunks r and
// 2P-1-r of the sequence split into 2P, chunk c being [c T / 2P, (c + 1) T / 2P) (sizes
// within one of each other; not contiguous_shard's ceil). gdn_plan counts from these too.
std::vector<Shard> attention_query_ranges(std::int64_t T, int P, int r, bool balanced);
// The same rows as a list of global positions.
std::vector<std::int64_t> attention_query_positions(std::int64_t T, int P, int r, bool balanced);

template <typename T, typename Dev>
class AttentionContextParallel {
 public:
  // q [B, Tl, Hq, D], k, v [B, Tl, Hkv, D]: this rank's shard cp.shard; o likewise.
  // q and o must stay valid and unchanged until backward() (or rebind()). In the bf16
  // mode the gathered K, V (and the balanced layout's q, o) are kept in bf16: q, k, v and
  // o are bf16 values there, so this is exact.

  void forward(const CpContext& cp, const AttentionDims& d, const T* q, const T* k, const T* v,
               T* o);
  // The forward's q and o moved: the same values at other addresses (a mixer that kept
  // them in bf16 and decoded them). The backward reads these instead.
  void rebind(const T* q, const T* o) {
    q_in_ = q;
    o_in_ = o;
  }
  // dO -> dq, dk, dv of this rank's shard (overwritten). Same cp as the forward.
  void backward(const CpContext& cp, const T* dO, T* dq, T* dk, T* dv);
  // (query, key) pairs of the last forward per head, summed over the batch rows: this
  // rank's share of the causal triangles (its attention FLOPs are 4 D Hq pairs forward).
  std::int64_t pairs() const { return pairs_; }
  // Frees what the forward kept (activation recomputation, docs/design.md §6c). Keep::replay
  // keeps nothing either: K and V are gathered again, as large as the kept activations.
  void release(Keep keep) {
    for (Kept<T, Dev>* b : {&k_all_, &v_all_, &q_, &o_}) b->clear();
    lse_ = Buffer<Dev, T>();
    lifecycle_.release(keep);
  }

 private:
  // Moves rows of `width` elements between the contiguous layout [B, Tl] and the query
  // layout [B, Tq] (to_queries) or back, by an all-to-all over cp.comm.
  void redistribute(const CpContext& cp, const T* src, T* dst, int width, bool to_queries,
                    const char* site) const;

  Lifecycle lifecycle_{"AttentionContextParallel"};
  AttentionDims d_;
  bool balanced_ = false;
  std::vector<std::int64_t> qpos_;      // the query rows' global positions, ascending
  Buffer<Dev, std::int64_t> qpos_dev_;  // the same in Dev's memory, for the attention op
  // With packed documents (cp.documents): each query row's first key [B, Tq], else empty.
  Buffer<Dev, std::int64_t> kstart_dev_;
  const std::int64_t* kstart_or_null() const {
    return kstart_dev_.size() ? kstart_dev_.data() : nullptr;
  }
  std::int64_t pairs_ = 0;
  Kept<T, Dev> k_all_, v_all_;  // [B, T, Hkv, D]: the whole sequence
  Kept<T, Dev> q_, o_;          // in the query layout (balanced only)
  Buffer<Dev, T> lse_;          // in the query layout
  const T* q_in_ = nullptr;     // the caller's q and o (not balanced)
  const T* o_in_ = nullptr;
};

}  // namespace gdn
