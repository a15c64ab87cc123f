// Windows held in memory: a TokenSource whose window `index` (of any step) is row `index`
// of a [B, T + 1] token array, so that a batch of given tokens (gdn_eval's --tokens, a
// validation set later) is cut into shards by next_batch exactly as a training step's is.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "train/data.h"

namespace gdn {

// rows: [B, T + 1] token ids; `name` names them in describe(). starts, when given: where
// the documents of every row start (positions p, 0 < p < T + 1, ascending, the same for
// every row), which has_documents() then reports (as a Megatron index does); without it,
// train.documents eos finds them after the EOS tokens.
std::shared_ptr<const TokenSource> token_rows(Tensor<std::int64_t> rows, std::string name,
                                              std::optional<std::vector<std::int64_t>> starts);

}  // namespace gdn
