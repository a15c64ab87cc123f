// The model's one door to the other ranks (docs/design.md §6): every communicator its
// layers use, set once (Model::set_comms) before the first step. Each must take the
// buffers of the device the model runs on, but expert_counts, which moves host counts.
#pragma once

#include "comm/communicator.h"
#include "cp/cp_context.h"

namespace gdn {

struct ModelComms {
  // The ranks that share the sequences: the GDN pairs, the attention K and V, the conv halo.
  Communicator* cp = nullptr;
  CpOptions cp_options;  // how the cp group exchanges (scan, attention balance, split)
  // Every rank of the global batch (dp x cp): the router's load-balancing sums.
  Communicator* batch = nullptr;
  // With experts.ep > 1, the ep group: the token rows' all-to-all, and the counts' (the
  // host ep group when the device's cannot move host memory). Null: every expert is here.
  Communicator* expert_rows = nullptr;
  Communicator* expert_counts = nullptr;

  // One communicator for cp and batch (one rank, or a cp-only run), no expert parallelism.
  static ModelComms single(Communicator& comm, CpOptions opt = {}) {
    ModelComms c;
    c.cp = c.batch = &comm;
    c.cp_options = opt;
    return c;
  }
};

}  // namespace gdn
