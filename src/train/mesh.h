// The dp x cp mesh: world rank = dp_rank * cp + cp_rank. Each cp group (one dp_rank)
// holds one set of sequences in contiguous shards in rank order; each dp group (one
// cp_rank) holds the same positions of different sequences. Expert parallelism folds onto
// the same ranks: each ep group is ep consecutive world ranks (ep_rank = world rank % ep)
// that exchange routed tokens, ep_rank r holding block r of every MoE layer's experts;
// the ranks with the same ep_rank (one per ep group) hold the same experts.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace gdn {

struct Mesh {
  Communicator* world = nullptr;
  std::unique_ptr<Communicator> cp_comm;  // ranks sharing the sequences (context)
  int dp = 1, cp = 1, dp_rank = 0, cp_rank = 0;
  int ep = 1, ep_rank = 0;
  // ep > 1: the ep group, and the ranks holding the same experts (null when ep = 1).
  std::unique_ptr<Communicator> ep_comm, expert_comm;
};

// Collective over world; world.size() must equal dp * cp and be a multiple of ep
// (validate_layout says how).
Mesh make_mesh(Communicator& world, int dp, int cp, int ep = 1);

}  // namespace gdn
