// Sizes formed from user input (seq_len x batch x hidden x bytes) must be checked before
// they are used: a product that wraps around turns into a small or negative size and
// fails far away ("0 tokens per step", std::vector's max_size). nullopt on overflow or a
// negative operand.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace gdn {

inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The product of all factors, or nullopt when it does not fit in int64.
inline std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors) {
  std::optional<std::int64_t> p = 1;
  for (std::int64_t f : factors)
    if (!(p = checked_mul(*p, f))) return std::nullopt;
  return p;
}

}  // namespace gdn
