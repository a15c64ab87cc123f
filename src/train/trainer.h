// The training loop: per step, shard the global batch over the dp x cp mesh, run the
// model's forward and backward on each shard, sum the gradients over all ranks, clip,
// take an AdamW step, log, and checkpoint.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/model.h"
#include "train/config.h"
#include "train/data.h"
#include "train/mesh.h"
#include "train/optimizer.h"

namespace gdn {

struct StepRecord {
  std::int64_t step = 0;  // 0-based
  double loss = 0, grad_norm = 0, lr = 0;
  std::int64_t tokens = 0;  // tokens in the global batch
  double step_ms = 0;
};

namespace train_sites {
inline const char* const kGradAllReduce = "train.grad_allreduce";
inline const char* const kLossAllReduce = "train.loss_allreduce";
}  // namespace train_sites

template <typename T>
class Trainer {
 public:
  // Collective over world. With resume, continues from the newest complete checkpoint in
  // train.checkpoint_dir (if there is one).
  Trainer(const RunConfig& cfg, Communicator& world, bool resume);

  // Runs the remaining steps up to train.steps; returns their records (on every rank).
  std::vector<StepRecord> run();
  // One step (used by run() and tests).
  StepRecord step();

  std::int64_t next_step() const { return step_; }
  GdnModel<T>& model() { return model_; }
  const Mesh& mesh() const { return mesh_; }

 private:
  void log_step(const StepRecord& r, double seconds_per_step);
  void save();

  RunConfig cfg_;
  Mesh mesh_;
  GdnModel<T> model_;
  AdamW<T> opt_;
  std::unique_ptr<TokenSource> data_;
  std::int64_t step_ = 0;
  std::uint64_t rng_state_ = 0;
  std::vector<T> flat_;  // packed gradients for the all-reduce
  std::ofstream log_;
};

}  // namespace gdn
