// The dp x cp mesh: world rank = dp_rank * cp + cp_rank. Each cp group (one dp_rank)
// holds one set of sequences in contiguous shards in rank order; each dp group (one
// cp_rank) holds the same positions of different sequences.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace gdn {

struct Mesh {
  Communicator* world = nullptr;
  std::unique_ptr<Communicator> cp_comm;  // ranks sharing the sequences (context)
  int dp = 1, cp = 1, dp_rank = 0, cp_rank = 0;
};

// Collective over world; world.size() must equal dp * cp (validate_layout says how).
Mesh make_mesh(Communicator& world, int dp, int cp);

}  // namespace gdn
