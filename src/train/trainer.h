// The training loop: per step, shard the global batch over the dp x cp mesh, run the
// model's forward and backward on each shard, sum the gradients over all ranks in one
// all-reduce of the flat gradient buffer, clip, take an AdamW step, log, and checkpoint.
// Written once over the device policy Dev: on a GPU, gradients are summed over a device
// communicator and the update runs on the device; host copies are made only for
// checkpoints. A non-finite loss, gradient norm or parameter stops the run at that step
// on every rank, before anything non-finite can reach a checkpoint.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/watchdog.h"
#include "cp/documents.h"
#include "cp/shard.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/pair_scan_choice.h"
#include "train/batch.h"
#include "train/checkpoint_rotation.h"
#include "train/data.h"
#include "train/eval_windows.h"
#include "train/mesh.h"
#include "train/optimizer.h"
#include "train/param_state.h"
#include "train/run.h"
#include "train/run_config.h"
#include "train/state_gather.h"
#include "train/step_log.h"
#include "train/step_profile.h"

namespace gdn {

struct RunResult {
  std::vector<StepRecord> steps;  // the steps that ran (the last one may have diverged)
  std::string stopped;            // why the run stopped early ("" when it ran to the end)
  // CPU time (user + system, all threads) this rank spent in the steps: its share of the
  // work, comparable across cp degrees where wall time on a shared machine is not.
  double cpu_seconds = 0;
  // The signal that stopped the run at a step boundary (0: none): the ranks agreed to
  // stop at the same step and saved a checkpoint there (with a checkpoint directory).
  int stop_signal = 0;
  // Another run took over one of this run's locks: the ranks stopped at the same step
  // without writing a checkpoint (`stopped` says why on rank 0).
  bool lock_lost = false;
  std::int64_t skipped_steps = 0;  // steps with no counted target (StepRecord::skipped)
};

struct TrainerOptions {
  bool resume = false;                 // continue from the newest complete checkpoint
  Watchdog* watchdog = nullptr;        // told of every step and phase, when set
  std::int64_t memory_available = -1;  // bytes this rank may use (-1: not checked)
  // A Hugging Face checkpoint directory whose weights replace the seeded initialisation
  // (model/hf_weights.h); a checkpoint found by resume comes first. "" for none.
  std::string init_from;
  // train.data, when the caller has opened it already (a token file's start-up pass over
  // every id then runs once); null: the trainer opens it.
  std::shared_ptr<const TokenSource> data;
  // When set, rank 0 writes the exact Communicator counters of the first step of every
  // rank to this JSON file (write_exchange_record): what gdn_plan's predictions are
  // checked against. "" for none.
  std::string exchange_out;
  // A fresh run (no resume) into a checkpoint directory that holds another run's
  // checkpoints is refused; with this, they are deleted first.
  bool overwrite_checkpoints = false;
  // Read at every step boundary (and before the first step): a signal asking the run to
  // stop, 0 for none (core/stop_signal.h's received). The ranks agree on it, so a signal
  // that reaches one rank first stops them all at the same step. Null: never asked.
  std::function<int()> stop_requested;
  // Read with stop_requested (rank 0, which holds the run's locks): "" while every lock
  // of the run is still its own, else which one another run took over. The ranks agree
  // on it, and the run stops there without writing anything more (train/run_lock.h).
  std::function<std::string()> lock_lost;
  // The keys of the run's identity (train/run_identity.h) in which a resumed checkpoint
  // may differ from this run (--accept-changes).
  std::vector<std::string> accepted_changes;
  // The step line's model FLOP/s and MFU (step_log.h); flops_per_step 0: not shown.
  ModelFlopRate rate;
};

// Why --resume refuses a checkpoint: its model differs (keys empty), or its run does, which
// --accept-changes `keys` (comma-separated) would accept.
struct ResumeRefusal {
  std::string why;  // "was written by ...", "" when it is resumed
  std::string keys;
};

template <typename T, typename Dev>
class Trainer {
 public:
  // Collective over world (the host communicator); dev_world holds the same ranks and
  // takes Dev's buffers (world itself on the host). First estimates this rank's memory
  // and refuses, with the numbers, a run that cannot fit in opt.memory_available; then
  // builds the mesh, model and optimizer, and resumes when asked (refusing a checkpoint
  // of another architecture, naming the key and both values).
  Trainer(const RunConfig& cfg, Communicator& world, Communicator& dev_world,
          const TrainerOptions& opt = {});

  // Runs the remaining steps up to train.steps (on every rank).
  RunResult run();
  // One step (used by run() and tests).
  StepRecord step();

  std::int64_t next_step() const { return step_; }
  const MemoryEstimate& memory_estimate() const { return run_.estimate(); }
  // How the GDN layers scan their pairs, and why (train.pair_scan, auto resolved).
  const PairScanChoice& pair_scan() const { return run_.pair_scan(); }
  // Every path choice of the run, resolved at start-up (train/run_layout.h).
  const RunLayout& layout() const { return run_.layout(); }
  // Rank 0 writes the current weights as a Hugging Face checkpoint (train/hf_export.h),
  // every rank sending its part one file at a time; collective.
  // file_dtype: the tensors' dtype (f32, f64 or bf16).
  void export_hf(const std::string& dir, std::int64_t max_file_bytes, DType file_dtype) const;
  // After a failed export: a checkpoint of the current step, where the trained weights
  // are safe. The checkpoint directory's, when it holds this step already; else written
  // beside `export_dir` (EXPORT.rescue-step-N), else under $TMPDIR (or /tmp). Collective;
  // returns its manifest's path, or "" when no place could take it (each failure warned).
  std::string save_rescue(const std::string& export_dir);
  Model<T, Dev>& model() { return run_.model(); }
  const Mesh& mesh() const { return run_.mesh(); }

 private:
  void progress(const char* phase);
  // The step's batch, read on every rank (the first documents reported).
  Batch read_batch();
  // Forward and backward of the batch, the gradients and the loss summed over the ranks:
  // the step's record up to its gradient norm.
  StepRecord forward_backward(const Batch& b);
  // The gradient norm, then AdamW with clipping, or the divergence message.
  void update(StepRecord& r);
  void save();
  // Collective: the largest stop signal any rank received (opt_.stop_requested).
  // The stop signal agreed by every rank (0: none), or kLockLost (trainer.cpp) when
  // rank 0 found a lock of the run taken over (lock_lost_ says which).
  int agreed_stop_signal();
  // Validation after step_ (train.eval_data): the loss over the counted targets of its
  // windows, logged. Collective.
  void validate();
  // The largest peak RSS and device buffer bytes of any rank (one collective).
  void record_peaks(StepRecord& r);
  // The step a batch with no counted target gives: logged, not trained on.
  StepRecord skipped_step(std::chrono::steady_clock::time_point t0);
  void prepare_checkpoint_dir();
  void resume();
  // Why --resume refuses checkpoint f ("" in why when it continues it), with `accepted`
  // as --accept-changes.
  ResumeRefusal resume_refusal(const CheckpointFile& f,
                               const std::vector<std::string>& accepted) const;
  // Why --resume would refuse the newest of a directory's checkpoints ("" when it would
  // continue it).
  std::string why_resume_refuses(const std::vector<CheckpointFile>& files) const;
  // Writes a checkpoint of the current step into dir (collective).
  void save_to(const std::string& dir);
  void drop_logged_steps();
  std::int64_t whole_count() const { return whole_.back().offset + whole_.back().size; }

  RunConfig cfg_;
  TrainerOptions opt_;
  Communicator& world_;
  // The mesh, the model and its ranks, the parameters' state (replicated or sharded), the
  // pair scan and the memory estimate (train/run.h).
  Run<T, Dev> run_;
  std::vector<ParamInfo> whole_;  // the parameters of the whole model (ep = 1): checkpoints
  AdamWConfig adamw_config_;
  std::shared_ptr<const TokenSource> data_;
  std::unique_ptr<EvalWindows> eval_;  // train.eval_data's windows, when set
  // The lowest val_loss so far (rank 0), recorded in checkpoints (the identity's
  // "best_val_loss", not compared on resume) and carried on by --resume.
  double best_val_ = std::numeric_limits<double>::quiet_NaN();
  std::int64_t step_ = 0;
  std::string lock_lost_;
  std::int64_t saved_step_ = -1;  // the step of the last checkpoint written or loaded
  bool documents_reported_ = false;
  nlohmann::json identity_;  // this run's (train/run_identity.h), recorded in checkpoints

  std::unique_ptr<StepLog> log_;
  std::unique_ptr<CheckpointRotation> rotation_;  // rank 0, with a checkpoint directory
};

}  // namespace gdn
