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
// A rank that cannot write its part still answers rank 0, then throws, and rank 0 throws
// naming the first such rank: no manifest is written, and no rank waits for another.
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
// one warning, from the lowest such rank, and the next older one tried. A file of another
// gdn-cp version or another program met on the way is an error naming its format, and so
// is a directory whose checkpoints none could be loaded: --resume never starts afresh
// from files it could not read. nullopt: dir holds no file named like a checkpoint.
template <typename T>
std::optional<LoadedCheckpoint> load_newest_checkpoint(
    Communicator& world, const std::string& dir, const std::vector<ParamInfo>& params,
    const std::vector<GlobalRun>& want, T* values, T* m, T* v,
    const std::function<void(const CheckpointFile&)>& accept);

}  // namespace gdn
