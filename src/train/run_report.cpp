#include "train/run_report.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "comm/call_sites.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "model/memory_estimate.h"

namespace gdn {

void report_documents(Communicator& world, int cp_rank, const TrainConfig& t,
                      const TokenSource& data, std::int32_t eos, const Documents& docs,
                      std::int64_t targets, std::int64_t step) {
  // Every cp rank of a group holds the same rows: the first one counts them.
  const Documents::Summary s = docs.summary();
  const bool counts = cp_rank == 0;
  std::int64_t sums[2] = {counts ? s.documents : 0, counts ? docs.rows() : 0};
  std::int64_t longest = s.longest;
  world.all_reduce_sum(sums, 2, train_sites::kStats);
  world.all_reduce_max(&longest, 1, train_sites::kStats);
  if (world.rank() != 0) return;
  const std::int64_t all = std::int64_t(t.batch_size) * t.seq_len;
  spdlog::info(
      "documents ({}): step {} has {:.2f} per window of {} tokens, mean length {:.1f}, longest "
      "{}; {} of {} targets ({:.2f}%) follow a document's last token and are not counted",
      data.has_documents() ? "from the dataset's index"
                           : fmt::format("ending with eos_token_id {}", eos),
      step + 1, double(sums[0]) / double(std::max<std::int64_t>(sums[1], 1)), t.seq_len,
      double(sums[1]) * double(t.seq_len) / double(std::max<std::int64_t>(sums[0], 1)), longest,
      all - targets, all, 100.0 * double(all - targets) / double(all));
}

void report_exchange(Communicator& world, const Communicator& cp, double attention_pairs,
                     AttentionLoadBalance balance) {
  // Each rank's share of the causal triangles of the attention layers, and what one step
  // exchanged over the cp group (rank 0's view): GDN's fixed-size pairs and conv halos
  // beside attention's K, V, which grow with the sequence.
  double hi = attention_pairs, sum = attention_pairs;
  world.all_reduce_max(&hi, 1, train_sites::kStats);
  world.all_reduce_sum(&sum, 1, train_sites::kStats);
  if (world.rank() != 0) return;
  if (sum > 0)
    spdlog::info("attention work per rank (query-key pairs, {}): max/mean {:.3f}", name_of(balance),
                 hi / (sum / world.size()));
  for (const auto& [site, c] : cp.counters())
    spdlog::info("exchange per step on rank 0, {}: {} calls, {} sent, {} received", site, c.calls,
                 format_bytes(double(c.bytes_sent)), format_bytes(double(c.bytes_received)));
}

namespace {

// The calls and bytes of each site between two readings of one communicator's counters.
void add_counter_delta(const std::map<std::string, CommCounter>& before,
                       const std::map<std::string, CommCounter>& after,
                       std::map<std::string, CommCounter>& out) {
  for (const auto& [site, c] : after) {
    const auto it = before.find(site);
    const CommCounter b = it == before.end() ? CommCounter{} : it->second;
    if (c.calls == b.calls) continue;
    CommCounter& o = out[site];
    o.calls += c.calls - b.calls;
    o.bytes_sent += c.bytes_sent - b.bytes_sent;
    o.bytes_received += c.bytes_received - b.bytes_received;
  }
}

}  // namespace

void write_exchange_record(Communicator& world, const Communicator& dev_world,
                           const std::vector<const Communicator*>& groups,
                           const CounterReadings& before, const Mesh& mesh, std::int64_t step,
                           const std::string& path) {
  // This rank's sites of the step: the cp group's (reset before it) and the world's (and
  // the device world's, when it is another communicator), as differences of readings
  // taken around the step, so that set-up and reporting traffic stay out.
  std::map<std::string, CommCounter> sites;
  for (const Communicator* c : groups)
    if (c) add_counter_delta({}, c->counters(), sites);
  add_counter_delta(before.world, world.counters(), sites);
  if (&dev_world != &world) add_counter_delta(before.dev, dev_world.counters(), sites);
  nlohmann::json mine{{"rank", world.rank()},
                      {"dp_rank", mesh.dp_rank},
                      {"cp_rank", mesh.cp_rank},
                      {"sites", nlohmann::json::object()}};
  for (const auto& [site, c] : sites)
    mine["sites"][site] = {
        {"calls", c.calls}, {"bytes_sent", c.bytes_sent}, {"bytes_received", c.bytes_received}};
  // Every rank's record to rank 0: the texts padded with spaces to the longest one.
  std::string text = mine.dump();
  std::int64_t len = std::int64_t(text.size());
  world.all_reduce_max(&len, 1, train_sites::kExchangeRecord);
  text.resize(std::size_t(len), ' ');
  std::string all(std::size_t(len) * std::size_t(world.size()), ' ');
  world.all_gather(text.data(), all.data(), std::size_t(len), train_sites::kExchangeRecord);
  if (world.rank() != 0) return;
  nlohmann::json doc{{"step", step}, {"ranks", nlohmann::json::array()}};
  for (int r = 0; r < world.size(); ++r)
    doc["ranks"].push_back(
        nlohmann::json::parse(all.substr(std::size_t(r * len), std::size_t(len))));
  std::ofstream f(path);
  f << doc.dump(1) << '\n';
  GDN_CHECK(f.good(), "cannot write the exchange record '", path, "': ", std::strerror(errno));
}

}  // namespace gdn
