// The batch of one training step on one rank: its shard of its dp group's sequences (the
// inputs and the next-token targets), and with train.documents the documents of each
// window, the targets they mask, and the count of targets left over the whole mesh.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "cp/documents.h"
#include "cp/shard.h"
#include "train/data.h"
#include "train/train_config.h"

namespace gdn {

struct Batch {
  // [rows x shard] each: inputs [t0, t1) and targets [t0 + 1, t1 + 1) of every window,
  // targets masked (ops::kIgnoreTarget) where a document ends.
  std::vector<std::int32_t> tokens, targets;
  int rows = 0;
  std::optional<Documents> documents;  // with train.documents
  // The targets counted in the global batch: rows x seq_len over the mesh, or with
  // documents those left unmasked (the same on every rank).
  std::int64_t global_targets = 0;
};

// The batch of `step` for dp rank `dp_rank`, whose cp rank holds `shard`. Only the tokens
// [t0, t1 + 1) of each window are read; with documents split at EOS, the whole window
// (any rank must find every boundary); a Megatron index says where they start.
// Collective over world with documents (the count of targets).
Batch next_batch(const TokenSource& data, const TrainConfig& t, std::int32_t eos,
                 const Shard& shard, int dp_rank, std::int64_t step, Communicator& world);

}  // namespace gdn
