// A batch of random token sequences for the model tests under mpirun, and one rank's
// part of it: its dp group's sequences, its cp shard of each, inputs and targets.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "cp/shard.h"

namespace gdn::test {

struct Batch {
  int B;
  std::int64_t T;
  std::vector<std::int32_t> seq;  // [B, T + 1]
};

inline Batch make_batch(int B, std::int64_t T, int vocab, std::uint64_t seed = 99) {
  Batch b{B, T, std::vector<std::int32_t>(std::size_t(B * (T + 1)))};
  Rng rng(seed);
  for (auto& t : b.seq) t = std::int32_t(rng.next_u64() % std::uint64_t(vocab));
  return b;
}

// The Bl = B / dp sequences of dp group dp_rank, positions s of each: tokens and the
// next-token targets, [Bl, s.size()].
struct ShardTokens {
  std::vector<std::int32_t> tokens, targets;
};
inline ShardTokens shard_tokens(const Batch& batch, int dp, int dp_rank, const Shard& s) {
  const int Bl = batch.B / dp;
  ShardTokens out{std::vector<std::int32_t>(std::size_t(Bl * s.size())),
                  std::vector<std::int32_t>(std::size_t(Bl * s.size()))};
  for (int b = 0; b < Bl; ++b) {
    const std::int32_t* seq = batch.seq.data() + (dp_rank * Bl + b) * (batch.T + 1);
    std::copy_n(seq + s.begin, s.size(), out.tokens.data() + b * s.size());
    std::copy_n(seq + s.begin + 1, s.size(), out.targets.data() + b * s.size());
  }
  return out;
}

}  // namespace gdn::test
