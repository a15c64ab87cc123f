// The cross-rank traffic of one training step, per rank and call site (the names of
// comm/call_sites.h), counted as the Communicator counts it, so it compares byte for byte
// with gdn_train --exchange-out.
// The counting rules and each site's formula: docs/design.md §10.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/enum_names.h"
#include "plan/plan_input.h"

namespace gdn::plan {

using SiteCounters = std::map<std::string, CommCounter>;

struct RankExchange {
  int rank = 0, dp_rank = 0, cp_rank = 0;
  SiteCounters sites;  // only sites with calls
};

// Every world rank's counters of one step.
std::vector<RankExchange> predict_exchange(const PlanInput& in);

// What a site's calls are, for the cost model (cluster.h). send_recv: one round of a
// point-to-point scan, each rank sending and receiving at most one block at once.
enum class Collective { all_gather, reduce_scatter, all_reduce, chain, all_to_all, send_recv };
constexpr std::array<const char*, 6> enum_names(Collective) {
  return {"all_gather", "reduce_scatter", "all_reduce", "chain", "all_to_all", "send_recv"};
}

struct SiteTraffic {
  std::string site;
  Collective kind;
  bool world = false;      // over every rank (else over one cp group)
  std::int64_t calls = 0;  // per rank per step
  // Per call: all-gather / reduce-scatter: one rank's block; all-reduce: the buffer;
  // chain: one hop's message; all-to-all: the most any rank sends or receives; send_recv:
  // the block of one round.
  double bytes = 0;
};

std::vector<SiteTraffic> step_traffic(const PlanInput& in);

}  // namespace gdn::plan
