// Router choices for the MoE op tests: k distinct experts per token, drawn from the first
// `used` of the experts (the others stay empty), row-major [N, k].
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace gdn::test {

inline std::vector<std::int32_t> random_expert_ids(std::int64_t N, int k, int used,
                                                   std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> idx;
  for (std::int64_t n = 0; n < N; ++n)
    for (int j = 0; j < k; ++j) {
      std::int32_t e;
      do e = std::int32_t(rng.next_u64() % std::uint64_t(used));
      while (std::find(idx.end() - j, idx.end(), e) != idx.end());
      idx.push_back(e);
    }
  return idx;
}

}  // namespace gdn::test
