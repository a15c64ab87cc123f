// The pair scans of docs/design.md §3-4 as a Hillis-Steele scan over point-to-point
// messages: ceil(log2 P) rounds, at most one pair sent per round, instead of gathering
// every rank's pair (gdn/pairs/pair_scan.h then scans them locally). A, B: this rank's
// map, [BH, K, K] and [BH, K, V], in Dev's memory, as is out ([BH, K, V]).
//   reverse = false: x -> A x + B, composed in rank order (forward states).
//   reverse = true:  y -> A^T y + B, composed in reverse rank order (backward adjoints).
// The messages are the Communicator's send_recv (MPI, or NCCL's grouped send / recv);
// the composing is gdn/pairs' start_scan and compose_pairs on Dev.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "gdn/pairs/pair_scan.h"

namespace gdn {

template <typename T, typename Dev>
void log_depth_scan(Dev, Communicator& comm, const T* A, const T* B, const PairDims& d,
                    bool reverse, const std::string& site, T* out);

}  // namespace gdn
