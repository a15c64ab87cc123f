#include "train/batch.h"

#include <algorithm>

#include "comm/call_sites.h"
#include "ops/cross_entropy/cross_entropy.h"

namespace gdn {

Batch next_batch(const TokenSource& data, const TrainConfig& t, std::int32_t eos,
                 const Shard& shard, int dp_rank, std::int64_t step, Communicator& world) {
  Batch b;
  b.rows = t.batch_size / t.dp;
  const std::int64_t n = shard.size();
  const bool packed = t.documents != DocumentSplit::none;
  const bool whole = packed && !data.has_documents();
  const std::int64_t first = whole ? 0 : shard.begin, len = whole ? t.seq_len + 1 : n + 1;
  std::vector<std::int32_t> window(len);
  b.tokens.resize(std::size_t(b.rows * n));
  b.targets.resize(std::size_t(b.rows * n));
  std::vector<std::vector<std::int64_t>> starts(packed ? b.rows : 0);
  for (int r = 0; r < b.rows; ++r) {
    const std::int64_t index = std::int64_t(dp_rank) * b.rows + r;
    data.window_part(step, index, t.seq_len + 1, first, len, window.data());
    std::copy_n(window.data() + shard.begin - first, n, b.tokens.data() + r * n);
    std::copy_n(window.data() + shard.begin - first + 1, n, b.targets.data() + r * n);
    if (packed)
      starts[r] = window_document_starts(data, step, index, t.seq_len,
                                         whole ? window.data() : nullptr, eos);
  }
  b.global_targets = std::int64_t(t.batch_size) * t.seq_len;
  if (packed) {
    b.documents = Documents::from_starts(starts, t.seq_len);
    b.documents->mask_targets(shard, b.targets.data());
    // The loss is the mean over the targets inside documents, counted over the whole batch.
    b.global_targets = std::count_if(b.targets.begin(), b.targets.end(),
                                     [](std::int32_t x) { return x != ops::kIgnoreTarget; });
    world.all_reduce_sum(&b.global_targets, 1, train_sites::kTargetCount);
  }
  return b;
}

}  // namespace gdn
