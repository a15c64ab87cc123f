// A cluster on paper, and the latency-bandwidth (alpha-beta) cost of each collective on
// it. Ranks fill the nodes in order (world rank w on node w / gpus), so a cp group of
// consecutive ranks stays on one node until it is larger than a node. A group that stays
// on one node runs at the NVLink bandwidth, one that spans nodes at each GPU's share of
// the network, net_GBps (every GPU has its own NIC); a collective runs at its slowest
// link. Costs of one call over n ranks with link latency a and bandwidth b:
//
//   ring all-gather, reduce-scatter of blocks of m bytes   (n - 1) (a + m / b)
//   ring all-reduce of m bytes                             2 (n - 1) a + 2 (n - 1) / n m / b
//   the conv halo chain (rank order, hop after hop)        (n - 1) (a + m / b)
//   all-to-all, m the most one rank sends or receives      (n - 1) a + m / b
//
// Nothing overlaps: gdn-cp's collectives block, so a step is its compute plus its
// communication.
#pragma once

#include <string>

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

double collective_seconds(Collective kind, int n, double bytes, const Link& link);

}  // namespace gdn::plan
