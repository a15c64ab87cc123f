// Everything that chooses a path through the code for a run, resolved once at start-up into
// one value (docs/design.md §7): the precision, the pair scan (auto resolved), activation
// recomputation, the training state's sharding, the host GEMM path (auto resolved on this
// CPU), and on CUDA the GDN walks, TF32 and the attention kernels. Logged at start-up in
// one line, recorded in the run identity of every checkpoint (not compared on resume:
// another layout continues the same run), and printed by gdn_plan from the same function.
// Below the apps nothing reads the environment for these: the old variables
// (GDN_GEMM_PATH, GDN_CUDA_WALK, GDN_CUDA_TF32) are read by the apps
// for one release, with a deprecation warning (apps/common/deprecated_env.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/dtype.h"
#include "model/pair_scan_choice.h"
#include "ops/gemm/gemm_path.h"
#include "train/train_config.h"

namespace gdn {

struct RunLayout {
  DType dtype = DType::f32;
  PairScanChoice pair_scan;
  Recompute recompute = Recompute::none;
  Sharding shard = Sharding::none;
  la::GemmPath gemm_path = la::GemmPath::kGeneric;
  pass::CudaWalk cuda_walk = pass::CudaWalk::automatic;
  bool cuda_tf32 = false;
  ops::AttentionBackend attention_backend = ops::AttentionBackend::automatic;

  // One line: "f64, pair_scan allgather (why), recompute none, shard none, gemm avx2,
  // cuda_walk auto, cuda_tf32 off, attention auto".
  std::string describe() const;
  nlohmann::json to_json() const;
  // Sets the process-wide kernel choices it names (the GEMM path, the CUDA walks, TF32,
  // the attention kernels): before the run's first GEMM.
  void apply() const;
};

// t's choices with the pair scan `scan` (resolve_pair_scan's, agreed by the ranks) and the
// GEMM path resolved on this CPU; a path it cannot run throws, naming the key or flag.
RunLayout resolve_layout(const TrainConfig& t, const PairScanChoice& scan);

}  // namespace gdn
