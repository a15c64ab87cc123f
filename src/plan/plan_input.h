// What gdn_plan plans for: the model and the layout of one training step, exactly as
// gdn_train would run it (the same config loading, flags and layout checks), so that the
// predictions can be compared with what a run of that config measures.
#pragma once

#include <cstdint>
#include <string>

#include "model/model_config.h"
#include "train/run_config.h"

namespace gdn::plan {

struct PlanInput {
  ModelConfig model;
  std::int64_t T = 0;  // tokens per sequence (train.seq_len)
  int batch = 1;       // sequences per step over all data-parallel groups
  int grad_accum = 1;  // micro-batches per step: a step holds one's activations
  int cp = 1, dp = 1;
  int chunk_size = 64;
  int elem_bytes = 4;  // f32: 4, f64: 8
  bool bf16 = false;   // the bf16 mode: f32 values, some activations kept in bf16
  bool recompute = false;
  bool layer_local = false;         // attention_load_balance layer_local
  Sharding shard = Sharding::none;  // train.shard, over the world
  int ep = 1;                       // train.ep
  // train.pair_scan as asked; automatic is resolved per layout (memory_fit.h: resolved).
  PairScan pair_scan = PairScan::automatic;
  std::string source;  // the config file, for messages

  int local_batch() const { return batch / dp; }                  // sequences of one cp group
  int micro_batch() const { return local_batch() / grad_accum; }  // held at once
  int world() const { return cp * dp; }
  // The same input at another cp degree (the layout checks still hold: T >= P).
  PlanInput at_cp(int P) const;
};

// From a run config after flags: checks the layout as gdn_train does for dp * cp ranks.
PlanInput plan_input(const RunConfig& c);

}  // namespace gdn::plan
