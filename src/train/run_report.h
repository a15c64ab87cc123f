// What a training run reports besides its steps (train/step_log.h): the documents of the
// first step with them, each rank's share of the attention work and the cp exchange of a
// step, and --exchange-out's record of every rank's counters (what gdn_plan predicts).
// Each is collective over the world, rank 0 printing or writing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "cp/documents.h"
#include "train/data.h"
#include "train/mesh.h"
#include "train/train_config.h"

namespace gdn {

// How many documents per window, their lengths and the targets left out, of `step`.
void report_documents(Communicator& world, int cp_rank, const TrainConfig& t,
                      const TokenSource& data, std::int32_t eos, const Documents& docs,
                      std::int64_t targets, std::int64_t step);

// Each rank's share of the causal triangles (max/mean of attention_pairs) and what one step
// exchanged over the cp group, per call site (rank 0's view).
void report_exchange(Communicator& world, const Communicator& cp, double attention_pairs,
                     AttentionLoadBalance balance);

// Readings of the world's (and device world's) counters before the step recorded.
struct CounterReadings {
  std::map<std::string, CommCounter> world, dev;
};

// Writes path: every rank's calls and bytes per call site in one step, from the groups'
// counters (reset before the step) and the worlds' differences since `before`.
void write_exchange_record(Communicator& world, const Communicator& dev_world,
                           const std::vector<const Communicator*>& groups,
                           const CounterReadings& before, const Mesh& mesh, std::int64_t step,
                           const std::string& path);

}  // namespace gdn
