// The training loop: per step, shard the global batch over the dp x cp mesh, run the
// model's forward and backward on each shard, sum the gradients over all ranks, clip,
// take an AdamW step, log, and checkpoint.
//
// Backend says where the model runs (model/host_backend.h, or the CUDA build's
// CudaBackend). On a device backend the gradients are summed over a device communicator,
// clipped and applied on the device (AdamW moments live there too); the loss is summed
// over the host world, and the ParamStore / AdamW moments on the host are refreshed from
// the device only to write a checkpoint.
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

template <typename T, typename Backend = HostBackend<T>>
class Trainer {
 public:
  // Collective over world. With resume, continues from the newest complete checkpoint in
  // train.checkpoint_dir (if there is one). A device backend needs device_world: the same
  // ranks as world, on a communicator that takes device buffers (make_device_communicator);
  // the host backend ignores it.
  Trainer(const RunConfig& cfg, Communicator& world, bool resume,
          Communicator* device_world = nullptr);

  // Runs the remaining steps up to train.steps; returns their records (on every rank).
  std::vector<StepRecord> run();
  // One step (used by run() and tests).
  StepRecord step();

  std::int64_t next_step() const { return step_; }
  GdnModel<T, Backend>& model() { return model_; }
  const Mesh& mesh() const { return mesh_; }

 private:
  void log_step(const StepRecord& r, double seconds_per_step);
  void save();
  // The device backend's share of a step: gradients summed and clipped, AdamW applied.
  void device_update(StepRecord& r);
  void upload_moments();
  void download_moments();

  RunConfig cfg_;
  Mesh mesh_;
  Mesh device_mesh_;  // the same mesh over device_world (device backend only)
  GdnModel<T, Backend> model_;
  AdamW<T> opt_;
  std::unique_ptr<TokenSource> data_;
  std::int64_t step_ = 0;
  std::uint64_t rng_state_ = 0;
  std::vector<T> flat_;             // packed gradients for the all-reduce (host backend)
  typename Backend::Vector m_, v_;  // flat AdamW moments (device backend)
  std::ofstream log_;
};

}  // namespace gdn
