// The cross-rank traffic of one training step, per rank and call site, with the site
// names of comm/call_sites.h and the counting rules of the Communicator
// (comm/communicator.h): an all-gather counts its own block sent and the whole output
// received, a reduce-scatter the whole input sent and one block received, an all-reduce
// its buffer both ways, point-to-point and all-to-all what crosses to other ranks. So the
// prediction can be compared, byte for byte, with what gdn_train --exchange-out records of
// a real step.
//
// Per step, with B = batch / dp sequences per cp group, e bytes per element, P = cp:
//   cp.fwd.allgather_pairs      each GDN layer: block B Hv K (K + V) e     (P > 1)
//   cp.bwd.allgather_adjoints   each GDN layer: block B Hv K V e           (P > 1)
//   cp.fwd/bwd.conv_halo        each GDN layer: B (W - 1) Cc e to the next (previous) rank
//   attn.fwd.allgather_kv       each attention layer: block B ceil(T / P) 2 Hkv D e, twice
//                               with --recompute layer (the replayed forward gathers again)
//   attn.bwd.reduce_scatter_dkv each attention layer: the same block
//   attn.*.alltoall_*           with layer_local: the rows of q, o, dO, dq that change rank
//   model.router_stats          with MoE: 2 E + 1 doubles, over every rank
//   train.grad_allreduce        the flat gradient buffer, parameters x e, over every rank
//   train.loss_allreduce, train.peak_rss   one double / one int64
// The replayed forward of a GDN layer exchanges nothing: it keeps the halo and the state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "plan/plan_input.h"

namespace gdn::plan {

using SiteCounters = std::map<std::string, CommCounter>;

struct RankExchange {
  int rank = 0, dp_rank = 0, cp_rank = 0;
  SiteCounters sites;  // only sites with calls
};

// Every world rank's counters of one step.
std::vector<RankExchange> predict_exchange(const PlanInput& in);

// What a site's calls are, for the cost model (cluster.h).
enum class Collective { all_gather, reduce_scatter, all_reduce, chain, all_to_all };
const char* collective_name(Collective c);

struct SiteTraffic {
  std::string site;
  Collective kind;
  bool world = false;      // over every rank (else over one cp group)
  std::int64_t calls = 0;  // per rank per step
  // Per call: all-gather / reduce-scatter: one rank's block; all-reduce: the buffer;
  // chain: one hop's message; all-to-all: the most any rank sends or receives.
  double bytes = 0;
};

std::vector<SiteTraffic> step_traffic(const PlanInput& in);

}  // namespace gdn::plan
