// The JSON-lines log of the steps (train.log): one object per step, {"step": i, ...} with
// i 0-based. A run killed after logging steps past its last checkpoint runs those steps
// again when resumed; the log must not hold them twice.
#pragma once

#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "train/step_profile.h"
#include "train/train_config.h"

namespace gdn {

struct StepRecord {
  std::int64_t step = 0;                   // 0-based
  double loss = 0, grad_norm = 0, lr = 0;  // loss: the mean token cross-entropy
  double aux_loss = 0;                     // the MoE load-balancing loss (0 without MoE)
  double total = 0;           // the objective: loss + router_aux_loss_coef * aux_loss when trained
  std::int64_t tokens = 0;    // targets in the global batch (inside documents, with them)
  std::int64_t peak_rss = 0;  // the largest peak resident memory of any rank so far, bytes
  std::int64_t peak_device = 0;  // on GPUs: the most device buffer bytes of any rank so far
  double step_ms = 0;
  StepProfile profile;  // --profile only: ms per component (train/step_profile.h)
  // Non-empty when the step found a non-finite value (the same on every rank): the run
  // stops there; the message names the step and the first non-finite tensor.
  std::string diverged;
  // No counted target in the global batch (train.documents masked them all): the step
  // ran no forward or update; its loss is undefined (logged as null).
  bool skipped = false;
};

// What the step line makes of a step's time: model FLOP/s per rank, and MFU (model FLOPs
// utilisation) against the machine's peak. flops_per_step: the model FLOPs of one step,
// forward + backward of the global batch at cp = 1 (gdn_plan's count; recomputation and
// cp's extra work are not model FLOPs); peak: one rank's peak FLOP/s (0: no MFU); ranks:
// the world. Nothing is shown when flops_per_step is 0.
struct ModelFlopRate {
  double flops_per_step = 0, peak = 0;
  int ranks = 1;
  // Model FLOP/s of one rank for a step of `ms`, and its share of the peak (0 without one).
  double per_rank(double ms) const { return flops_per_step / ranks / (ms * 1e-3); }
  double mfu(double ms) const { return peak > 0 ? per_rank(ms) / peak : 0; }
};

// What rank 0 prints and writes of each step: one line on stderr (loss, gradient norm, lr,
// time, tokens/s, peak RSS, ETA), one JSON object in train.log, and with --profile the
// mean profile after step 3 and after the last step. On other ranks it does nothing.
class StepLog {
 public:
  // Opens train.log for appending (rank 0, when t.log is set); errors name the file. A
  // FIFO without a reader is refused at once rather than waited for.
  StepLog(const TrainConfig& t, const ModelConfig& m, bool root, ModelFlopRate rate = {});
  ~StepLog();
  StepLog(const StepLog&) = delete;
  StepLog& operator=(const StepLog&) = delete;
  // One step; seconds_per_step gives the ETA.
  void write(const StepRecord& r, double seconds_per_step);
  // Validation after 0-based step `step`: the step line's "validation" line (with the best
  // val_loss so far), and {"step", "val_loss", "val_tokens", "val_ms"} in the log.
  void write_validation(std::int64_t step, double loss, std::int64_t tokens, double ms,
                        double best);
  // --profile: the mean profile of `steps` (the first one left out), after step 3 and
  // after the last step.
  void profile(const std::vector<StepRecord>& steps) const;

 private:
  const TrainConfig& t_;
  bool moe_, root_;
  ModelFlopRate rate_;
  void append(const std::string& line);

  int fd_ = -1;  // the log, or -1
  bool write_failed_ = false;
  std::int64_t skipped_ = 0;  // the skipped steps written so far
};

// Keeps the lines of steps < `step` (the checkpoint's step: the next step to run) and
// drops the rest, and any line that is not a step record (one torn by the kill), by
// writing the kept lines to a temporary file and renaming it over the log (a crash
// leaves the old log or the new one). Returns the number of lines dropped; a missing log,
// or one that is not a regular file (/dev/stdout), is left alone (0). Errors name the file.
std::int64_t truncate_step_log(const std::string& path, std::int64_t step);

// The step records of a log: how many, and the last one's step.
struct LoggedSteps {
  std::int64_t count = 0, last = 0;
};
// nullopt when the log is missing, not a regular file, or holds no step record.
std::optional<LoggedSteps> logged_steps(const std::string& path);

}  // namespace gdn
