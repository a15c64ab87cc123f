// stats.json of gdn_kernel: the problem, the layout, and per call site of the CP core the
// bytes every rank sent and received, forward and backward (the app's own gathering is
// left out), with the wall time (the maximum over ranks).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "comm/communicator.h"
#include "gdn/problem.h"
#include "gdn_kernel/options.h"

namespace gdn::kernel_app {

// What one pass left in the op's communicator.
struct PassStats {
  double seconds = 0;
  std::map<std::string, CommCounter> counters;
};

// Collective over comm (the host communicator): gathers every rank's counters and times.
// The document is complete on rank 0.
nlohmann::ordered_json make_stats(Communicator& comm, const Args& a, const GdnProblem& p,
                                  const char* dtype, bool h0, bool dht, const PassStats& fwd,
                                  const PassStats* bwd);

}  // namespace gdn::kernel_app
