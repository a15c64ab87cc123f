// The pair scans of docs/design.md §3-4 as a Hillis-Steele scan over point-to-point
// messages: ceil(log2 P) rounds, at most one pair sent per round, instead of gathering
// every rank's pair (gdn/pairs/pair_scan.h then scans them locally). A, B: this rank's
// map, [BH, K, K] and [BH, K, V].
//   reverse = false: x -> A x + B, composed in rank order (forward states).
//   reverse = true:  y -> A^T y + B, composed in reverse rank order (backward adjoints).
// Not on the GPU yet: the Cuda overload throws gdn::Error saying so.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "core/device.h"
#include "gdn/pairs/pair_scan.h"

namespace gdn {

template <typename T>
void log_depth_scan(Host, Communicator& comm, const T* A, const T* B, const PairDims& d,
                    bool reverse, const std::string& site, T* out);
template <typename T>
void log_depth_scan(Cuda, Communicator& comm, const T* A, const T* B, const PairDims& d,
                    bool reverse, const std::string& site, T* out);

}  // namespace gdn
