// One run of the model on this rank, assembled once from the run config and the world
// (docs/design.md §7): the pair scan every rank agreed on, the run's layout (every path
// choice, resolved and applied: train/run_layout.h), this rank's memory estimate
// (checked against what it may use before anything is allocated), the dp x cp x ep mesh,
// the model with its ranks (ModelComms), and the parameters' state, replicated or sharded
// (train.shard). gdn_train's Trainer and gdn_eval each own one, so the parity against
// transformers runs the trainer's own assembly; validation and gradient accumulation
// build on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/pair_scan_choice.h"
#include "train/batch.h"
#include "train/mesh.h"
#include "train/param_state.h"
#include "train/run_config.h"
#include "train/run_layout.h"

namespace gdn {

// What the memory estimate of a rank of this run is made of (its largest shard), at pair
// scan `scan`; elem_bytes: sizeof(T).
EstimateInputs estimate_inputs(const RunConfig& cfg, int elem_bytes, PairScan scan);

template <typename T, typename Dev>
class Run {
 public:
  // world: the host communicator of every rank; dev_world: the same ranks on Dev (world
  // itself on the host). memory_available: the bytes this rank may use (-1: unchecked);
  // an estimate above it throws, naming the numbers. Collective. The parameters are
  // allocated but not set: state().init(seed), or set_local_values.
  Run(const RunConfig& cfg, Communicator& world, Communicator& dev_world,
      std::int64_t memory_available);

  const RunConfig& config() const { return cfg_; }
  // How the GDN layers scan their pairs, and why (train.pair_scan, auto resolved).
  const PairScanChoice& pair_scan() const { return pair_scan_; }
  // Every path choice of the run, resolved (applied when the Run is built).
  const RunLayout& layout() const { return layout_; }
  const MemoryEstimate& estimate() const { return estimate_; }
  Mesh& mesh() { return mesh_; }
  const Mesh& mesh() const { return mesh_; }
  // This rank's shard of every sequence of its cp group.
  const Shard& shard() const { return shard_; }
  Model<T, Dev>& model() { return model_; }
  const Model<T, Dev>& model() const { return model_; }
  ParamState<T, Dev>& state() { return *state_; }
  const ParamState<T, Dev>& state() const { return *state_; }
  // The ep group on the host (ep > 1; Dev's own when Dev is the host); null at ep = 1.
  Communicator* host_ep_comm() const {
    return host_ep_comm_ ? host_ep_comm_.get() : mesh_.ep_comm.get();
  }
  // Every communicator of the run's groups, each once: the cp group's, and with ep > 1 the
  // ep group, the expert group and the host's ep group when Dev is not the host (the
  // exchange record and its counters; the world's are read apart).
  std::vector<Communicator*> group_comms() const;

  // The model's forward and backward of b (next_batch's, this rank's), the loss averaged
  // over b.global_targets, the gradients zeroed before and summed over every rank after
  // (state().reduce_gradients(), unless the backward did it: train.shard full). phase, when
  // set, is told each part as it starts (the watchdog's phases). Returns this rank's
  // losses (ce_sum not yet summed over the ranks). Collective.
  typename Model<T, Dev>::Losses forward_backward(
      const Batch& b, const std::function<void(const char*)>& phase = {});
  // The forward alone of b (validation): this rank's summed cross-entropy of its counted
  // targets, no gradient touched. Collective.
  double forward_loss(const Batch& b);

 private:
  RunConfig cfg_;
  PairScanChoice pair_scan_;  // first: the estimate depends on it
  RunLayout layout_;          // applied before anything else runs
  MemoryEstimate estimate_;   // computed and checked before anything is allocated
  Mesh mesh_;                 // over dev_world
  Shard shard_;
  Model<T, Dev> model_;
  std::unique_ptr<Communicator> host_ep_comm_;  // the ep group on the host, when Dev is not
  std::unique_ptr<ParamState<T, Dev>> state_;
};

}  // namespace gdn
