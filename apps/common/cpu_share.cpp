#include "common/cpu_share.h"

#include <omp.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "comm/call_sites.h"

namespace gdn::app {

CpuShare this_cpu_share() {
  CpuShare s;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) s.host = host;
  s.threads = omp_get_max_threads();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) s.cpus.push_back(c);
  }
  return s;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

std::vector<std::string> cpu_share_warnings(const std::vector<CpuShare>& ranks) {
  std::vector<std::string> out;
  std::vector<int> crowded;  // ranks whose own threads outnumber their CPUs
  for (std::size_t r = 0; r < ranks.size(); ++r)
    if (ranks[r].threads > int(ranks[r].cpus.size())) crowded.push_back(int(r));
  if (!crowded.empty()) {
    const CpuShare& s = ranks[std::size_t(crowded.front())];
    out.push_back(fmt::format(
        "{} of {} ranks run more OpenMP threads than they have CPUs (rank {}: {} threads on "
        "CPU{} {}): the threads share them",
        crowded.size(), ranks.size(), crowded.front(), s.threads, s.cpus.size() == 1 ? "" : "s",
        cpu_list(s.cpus)));
  }
  // Per node: the threads of all its ranks against the CPUs any of them may use.
  std::map<std::string, std::pair<int, std::set<int>>> nodes;
  std::map<std::string, int> node_ranks;
  for (const CpuShare& s : ranks) {
    auto& [threads, cpus] = nodes[s.host];
    threads += s.threads;
    cpus.insert(s.cpus.begin(), s.cpus.end());
    ++node_ranks[s.host];
  }
  if (crowded.empty())
    for (const auto& [host, n] : nodes)
      if (n.first > int(n.second.size())) {
        out.push_back(fmt::format(
            "node {}: its {} ranks run {} OpenMP threads in all on {} CPUs ({}): the threads "
            "share them",
            host, node_ranks[host], n.first, n.second.size(),
            cpu_list(std::vector<int>(n.second.begin(), n.second.end()))));
        break;  // one node says it
      }
  return out;
}

bool fit_threads_to_cpus(CpuShare& s) {
  if (std::getenv("OMP_NUM_THREADS") || s.cpus.empty() || s.threads <= int(s.cpus.size()))
    return false;
  s.threads = int(s.cpus.size());
  omp_set_num_threads(s.threads);
  return true;
}

void report_cpu_share(Communicator& world) {
  // Fixed-size records: host name, threads, then a bit per CPU.
  constexpr std::size_t kHost = 64, kCpus = CPU_SETSIZE, kBytes = kHost + 4 + kCpus / 8;
  CpuShare mine = this_cpu_share();
  const bool fitted = fit_threads_to_cpus(mine);
  std::vector<unsigned char> rec(kBytes, 0), all(kBytes * std::size_t(world.size()));
  std::memcpy(rec.data(), mine.host.data(), std::min(mine.host.size(), kHost - 1));
  std::memcpy(rec.data() + kHost, &mine.threads, 4);
  for (int c : mine.cpus) rec[kHost + 4 + std::size_t(c) / 8] |= (1u << (c % 8));
  world.all_gather(rec.data(), all.data(), kBytes, app_sites::kCpuShare);
  if (world.rank() != 0) return;
  std::vector<CpuShare> ranks(std::size_t(world.size()));
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const unsigned char* p = all.data() + r * kBytes;
    ranks[r].host.assign(reinterpret_cast<const char*>(p),
                         strnlen(reinterpret_cast<const char*>(p), kHost));
    std::memcpy(&ranks[r].threads, p + kHost, 4);
    for (std::size_t c = 0; c < kCpus; ++c)
      if (p[kHost + 4 + c / 8] & (1u << (c % 8))) ranks[r].cpus.push_back(int(c));
  }
  const bool same = std::all_of(ranks.begin(), ranks.end(),
                                [&](const CpuShare& s) { return s.threads == mine.threads; });
  spdlog::info("{} OpenMP thread{} per rank{}; rank 0 may run on CPU{} {} of {}", mine.threads,
               mine.threads == 1 ? "" : "s", same ? "" : " (rank 0; others differ)",
               mine.cpus.size() == 1 ? "" : "s", cpu_list(mine.cpus), mine.host);
  if (fitted)
    spdlog::info(
        "rank 0 may run on fewer CPUs than OpenMP's default thread count: it runs "
        "one thread per CPU it has (set OMP_NUM_THREADS to choose)");
  const char* set = std::getenv("OMP_NUM_THREADS");
  for (const std::string& w : cpu_share_warnings(ranks))
    spdlog::warn(
        "{}{}. Give each rank its cores: mpirun --map-by slot:PE=<threads> (or --bind-to none "
        "with OMP_NUM_THREADS = cores / ranks), srun --cpus-per-task=<threads> --cpu-bind=cores",
        w, set ? fmt::format(" (OMP_NUM_THREADS={} is set, so the threads are kept)", set) : "");
}

}  // namespace gdn::app
