// Which files --keep-checkpoints may delete. A directory can hold files named like
// checkpoints that are not this run's: random bytes, a torn or non-finite file, a
// checkpoint of another model. Counting them would let one such file, named for a late
// step, push every checkpoint the run writes out of the newest N. So only the loadable
// checkpoints of this run count (and only they are ever deleted); the others are left
// alone and named once, in one warning per file at start-up.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/checkpoint.h"

namespace gdn {

class CheckpointRotation {
 public:
  // Why a loadable checkpoint is not this run's ("" when it is), e.g. "was written by
  // another model (...)": the message puts the file's name before it.
  using NotOurs = std::function<std::string(const TrainingState&)>;

  // files: scan_checkpoints(dir) at start-up. keep <= 0 keeps everything.
  CheckpointRotation(std::string dir, int keep, const std::vector<CheckpointFile>& files,
                     const NotOurs& not_ours);

  // The files named like checkpoints that are not this run's: path, and the reason
  // (naming the file).
  const std::vector<std::pair<std::string, std::string>>& foreign() const { return foreign_; }
  // One warning per foreign file (at most a few, then a count), when keep > 0.
  void report() const;

  // After this run saved the checkpoint of `step`: counts it, then deletes all but the
  // newest `keep` of this run's checkpoints. Returns the deleted paths.
  std::vector<std::string> saved(std::int64_t step);

 private:
  std::string dir_;
  int keep_;
  std::vector<std::pair<std::int64_t, std::string>> ours_;    // newest first
  std::vector<std::pair<std::string, std::string>> foreign_;  // path, reason
};

}  // namespace gdn
