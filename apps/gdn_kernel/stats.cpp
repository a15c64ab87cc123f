#include "gdn_kernel/stats.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

#include "comm/call_sites.h"
#include "cp/shard.h"

namespace gdn::kernel_app {

namespace {

const std::vector<std::string>& known_sites() {
  static const std::vector<std::string> s = {
      cp_sites::kForwardPairs,    cp_sites::kBackwardAdjoints, cp_sites::kForwardLogScan,
      cp_sites::kBackwardLogScan, cp_sites::kFinalState,       cp_sites::kInitialStateGrad};
  return s;
}

// This rank's counters for the known CP sites as a flat array (calls, sent, received).
std::vector<std::int64_t> flatten(const std::map<std::string, CommCounter>& c, int rank) {
  std::vector<std::int64_t> out;
  for (const auto& site : known_sites()) {
    auto it = c.find(site);
    const CommCounter z = it == c.end() ? CommCounter{} : it->second;
    out.insert(out.end(), {z.calls, z.bytes_sent, z.bytes_received});
  }
  for (const auto& [site, ctr] : c)
    if (site.rfind("cp.", 0) == 0 &&
        std::find(known_sites().begin(), known_sites().end(), site) == known_sites().end())
      spdlog::warn("rank {}: call site {} is not in cp_sites and is left out of stats.json", rank,
                   site);
  return out;
}

// {site: [{rank, calls, bytes_sent, bytes_received} for each rank]} for sites used by any rank.
nlohmann::ordered_json counters_json(Communicator& comm,
                                     const std::map<std::string, CommCounter>& c) {
  const std::vector<std::int64_t> mine = flatten(c, comm.rank());
  std::vector<std::int64_t> all(mine.size() * comm.size());
  comm.all_gather(mine.data(), all.data(), sizeof(std::int64_t) * mine.size(),
                  app_sites::kGatherStats);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (std::size_t s = 0; s < known_sites().size(); ++s) {
    nlohmann::ordered_json per_rank = nlohmann::ordered_json::array();
    bool used = false;
    for (int r = 0; r < comm.size(); ++r) {
      const std::int64_t* x = all.data() + r * mine.size() + 3 * s;
      used |= x[0] > 0;
      per_rank.push_back(
          {{"rank", r}, {"calls", x[0]}, {"bytes_sent", x[1]}, {"bytes_received", x[2]}});
    }
    if (used) j[known_sites()[s]] = per_rank;
  }
  return j;
}

double max_over_ranks(Communicator& comm, double x) {
  comm.all_reduce_max(&x, 1, app_sites::kGatherStats);
  return x;
}

}  // namespace

nlohmann::ordered_json make_stats(Communicator& comm, const Args& a, const GdnProblem& p,
                                  const char* dtype, bool h0, bool dht, const PassStats& fwd,
                                  const PassStats* bwd) {
  const int P = comm.size();
  nlohmann::ordered_json stats;
  stats["ranks"] = P;
  stats["shape"] = {{"B", p.B},
                    {"T", p.T},
                    {"Hk", p.Hk},
                    {"Hv", p.Hv},
                    {"K", p.K},
                    {"V", p.V},
                    {"N", p.num_sequences()},
                    {"packed", !p.cu_seqlens.empty()}};
  stats["dtype"] = dtype;
  stats["device"] = app::device_name(a.device);
  stats["chunk_size"] = p.chunk_size;
  stats["scale"] = p.scale_value();
  stats["l2norm_qk"] = p.l2norm_qk;
  stats["log_depth_scan"] = a.log_depth_scan;
  stats["h0"] = h0;
  stats["dht"] = dht;
  nlohmann::ordered_json shards = nlohmann::ordered_json::array();
  for (int r = 0; r < P; ++r) {
    const Shard s = contiguous_shard(p.T, P, r);
    shards.push_back({s.begin, s.end});
  }
  stats["shards"] = shards;
  stats["forward"] = counters_json(comm, fwd.counters);
  stats["seconds"] = {{"forward", max_over_ranks(comm, fwd.seconds)}};
  if (bwd) {
    stats["backward"] = counters_json(comm, bwd->counters);
    stats["seconds"]["backward"] = max_over_ranks(comm, bwd->seconds);
  }
  return stats;
}

}  // namespace gdn::kernel_app
