// The replicated training state (train.shard none) under expert parallelism: every rank
// holds every parameter but the experts, of which it holds its ep rank's block
// (docs/design.md §6d).
#pragma once

#include "comm/communicator.h"
#include "model/params.h"
#include "train/mesh.h"

namespace gdn {

// Sums the gradients over the ranks: one all-reduce of the flat buffer over the world when
// ep = 1; with ep > 1, each run of units of one kind, experts over the ranks holding them
// (Mesh::expert_comm), the rest over the world.
template <typename T, typename Dev>
void reduce_grads(ParamStore<T, Dev>& ps, Mesh& mesh);

// The sum of squares of the whole model's gradients (or values) from this rank's flat
// buffer of them: with ep > 1 the experts' part is summed over the ep group (host_ep, on
// the host), which holds each expert once.
template <typename T, typename Dev>
double whole_sum_squares(const ParamStore<T, Dev>& ps, const T* flat, const Mesh& mesh,
                         Communicator* host_ep);

}  // namespace gdn
