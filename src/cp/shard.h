// How the sequence is split over context-parallel ranks: contiguous, in rank order.
#pragma once

#include <cstdint>
#include <string>

namespace gdn {

// Rank r holds tokens [begin, end) of the global sequence.
struct Shard {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
};

// Ceil split: every rank gets ceil(T / P) tokens except the last ones, which may hold
// fewer, even none (T = 5, P = 4 gives 2, 2, 1, 0).
Shard contiguous_shard(std::int64_t T, int P, int r);

enum class LoadBalance { none, zigzag };

// Parses "none" | "zigzag" (also "load_balanced"); anything else is an error naming the value.
LoadBalance parse_load_balance(const std::string& s);

// Why zigzag / load-balanced sharding cannot work for the gated delta rule.
extern const char* const kContiguousShardsRequired;

// Throws gdn::Error with kContiguousShardsRequired unless lb is none. Called by the apps
// at startup on every rank, before any collective, so every rank exits with the message.
void require_contiguous_shards(LoadBalance lb, const std::string& where);

}  // namespace gdn
