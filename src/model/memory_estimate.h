// What one rank's training step holds in memory, from the config alone, so the trainer
// can refuse a model that cannot fit before it allocates anything (docs/design.md §6):
// parameters, gradients and AdamW moments (replicated, or sharded over the world by
// train.shard), the activations kept from the forward for the backward, and the largest
// buffers alive at once on top.
#pragma once

#include <cstdint>
#include <string>

#include "gdn/pairs/scan_cost.h"
#include "gdn/problem.h"
#include "model/model_config.h"
#include "model/param_partition.h"

namespace gdn {

// Elements of activations: kept from forward to backward, and the most held at once
// beyond those (a layer's backward scratch, the logits); `exchanged`: the part of `kept`
// that a recomputing layer keeps anyway (Mixer::release(Keep::replay): what came from
// other ranks and, for GDN, the per-chunk entry states of the core). In the bf16 mode
// `kept_bf16` of the kept elements are stored in bf16 (ops/convert/kept.h), `remade_bf16` of
// them are not kept at all (the backward makes them again), and the backward decodes or
// remakes up to `decoded` elements into float scratch on top of `transient`.
struct ActivationElems {
  std::int64_t kept = 0, transient = 0, exchanged = 0, kept_bf16 = 0, remade_bf16 = 0, decoded = 0;
};

// The shard a rank holds: B sequences of Tl of T tokens, at cp degree P, and how its GDN
// layers scan their pairs (allgather or log_depth: resolved, model/pair_scan_choice.h).
struct ShardShape {
  int B = 1;
  std::int64_t Tl = 0, T = 0;
  int P = 1;
  int chunk_size = kDefaultChunkSize;
  PairScan scan = PairScan::allgather;
  std::int64_t tokens() const { return std::int64_t(B) * Tl; }
  // The largest shard of B rows of T tokens over P ranks: ceil(T / P) tokens per row.
  static ShardShape largest(int B, std::int64_t T, int P, int chunk_size,
                            PairScan scan = PairScan::allgather) {
    return {B, (T + P - 1) / P, T, P, chunk_size, scan};
  }
};

// The training state's layout: train.shard over `world` ranks.
struct StateLayout {
  Sharding shard = Sharding::none;
  int world = 1;
  int ep = 1;  // the experts of each MoE layer split over ep ranks
};

struct MemoryEstimate {
  // Bytes. params and grads: what stays resident (sharded: the owned part; optimizer: the
  // whole model's too); moments: AdamW's two; gathered: the units gathered at once and the
  // reduce-scatter's padded buffer (sharded only).
  std::int64_t params = 0, grads = 0, moments = 0, gathered = 0, activations = 0, transient = 0;
  std::int64_t total() const {
    return params + grads + moments + gathered + activations + transient;
  }
  // "12.3 GiB: parameters 1.2 GiB, gradients ..., activations ... (kept) + ... (transient)"
  std::string describe() const;
};

// elem_bytes: 4 for f32 (and bf16 runs), 8 for f64. recompute: activation recomputation
// (ModelOptions). bf16: the bf16 mode, which keeps some activations in bf16.
MemoryEstimate estimate_memory(const ModelConfig& c, const ShardShape& s, int elem_bytes,
                               bool recompute = false, StateLayout state = {}, bool bf16 = false);

// The elements of the training state one rank holds (rank 0, which owns the most): the
// `params`, `grads`, `moments` and `gathered` of MemoryEstimate, in elements.
MemoryEstimate state_elements(const ModelConfig& c, StateLayout state);

std::string format_bytes(double bytes);

}  // namespace gdn
