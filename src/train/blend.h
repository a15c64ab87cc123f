// Data blends, as Megatron's --data-path 0.7 a 0.3 b: train.data "W1:FILE1,W2:FILE2,..."
// draws each window from one source, chosen by weight (weights >= 0, not all 0, need not
// sum to 1) as a function of (seed, step, index) alone, so every layout sees the same
// batch; the chosen source then gives the window it would give alone for (step, index).
// A blend of one source is that source. Sources are any train.data but synthetic and
// another blend; either all record their documents (Megatron datasets) or none does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "train/data.h"

namespace gdn {

// Whether `data` is a blend: comma-separated items, each a number, ':' and a file.
bool is_blend(const std::string& data);

// The blend `data` names, its sources opened as make_token_source opens each file. Errors
// name the item and what was expected (a negative weight, all weights 0, a missing file:
// the source's own message).
std::unique_ptr<TokenSource> make_blend(const std::string& data, int vocab_size, std::uint64_t seed,
                                        std::int64_t seq_len);

// Which source of a blend with these weights window (step, index) comes from (a blend's
// choice, exposed for the test of its realised shares).
int blend_choice(const std::vector<double>& weights, std::uint64_t seed, std::int64_t step,
                 std::int64_t index);

}  // namespace gdn
