// A cluster on paper, and the latency-bandwidth (alpha-beta) cost of each collective on
// it: ranks fill the nodes in order, a collective runs at its slowest link, nothing
// overlaps. The placement and the cost formulas: docs/design.md §10.
#pragma once

#include <string>

#include "gdn/pairs/scan_cost.h"
#include "plan/exchange.h"

namespace gdn::plan {

struct ClusterSpec {
  int nodes = 1, gpus = 8;
  double nvlink_GBps = 0, net_GBps = 0;  // per GPU, 1 GB/s = 1e9 bytes/s
  double nvlink_us = 2.0, net_us = 5.0;  // per message latency
  int ranks() const { return nodes * gpus; }
};

// "nodes=4,gpus=8,nvlink_GBps=450,net_GBps=50[,nvlink_us=2,net_us=5]"; errors name the
// bad key or value.
ClusterSpec parse_cluster(const std::string& text);

struct Link {
  double bytes_per_s = 0, latency_s = 0;
  bool network = false;
};

// The slowest link of the groups of n consecutive ranks starting at multiples of n
// (groups = how many there are).
Link group_link(const ClusterSpec& c, int n, int groups);

// The link of in's cp groups, as the pair scan choice takes it (gdn/pairs/scan_cost.h).
ScanLink cp_scan_link(const PlanInput& in, const ClusterSpec& c);

// One call's alpha-beta cost over n ranks (the formulas of docs/design.md §10).
double collective_seconds(Collective kind, int n, double bytes, const Link& link);

}  // namespace gdn::plan
