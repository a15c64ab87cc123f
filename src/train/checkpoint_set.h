// The collective side of checkpoints (train/checkpoint.h): every rank writes its part and
// rank 0 the manifest; on resume, the ranks agree on the newest checkpoint that each of
// them could read its runs from.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "train/checkpoint.h"

namespace gdn {

// Collective over world: each rank with runs writes its part ((global, at, n) into
// values, m, v), then rank 0 gathers the parts' entries and writes the manifest, last.
// A rank that cannot write its part throws, which ends the job: no manifest is written.
template <typename T>
void save_checkpoint_set(Communicator& world, const std::string& dir, const TrainingState& state,
                         const std::vector<ParamInfo>& params, const std::vector<GlobalRun>& runs,
                         const T* values, const T* m, const T* v);

struct LoadedCheckpoint {
  std::string path;  // the manifest
  TrainingState state;
};

// Collective over world: the newest checkpoint of dir whose manifest is complete, that
// `accept` does not refuse (it throws, the same on every rank: another model's, say), and
// from which every rank read its `want` runs into values, m, v. A checkpoint some rank
// could not read (a part missing, corrupt or holding a non-finite value) is skipped with
// one warning, from the lowest such rank, and the next older one tried. nullopt: none.
template <typename T>
std::optional<LoadedCheckpoint> load_newest_checkpoint(
    Communicator& world, const std::string& dir, const std::vector<ParamInfo>& params,
    const std::vector<GlobalRun>& want, T* values, T* m, T* v,
    const std::function<void(const CheckpointFile&)>& accept);

}  // namespace gdn
