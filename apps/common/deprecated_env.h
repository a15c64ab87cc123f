// The environment variables that chose kernels before the run's layout did
// (train/run_layout.h): GDN_GEMM_PATH (train.gemm_path), GDN_CUDA_WALK (cuda_walk) and
// GDN_CUDA_TF32 (cuda_tf32). For one release a variable still sets its key where neither
// the config nor a flag did, with a warning naming the key and its flag; where one did, the
// variable is ignored, with a warning. GDN_CUDA_ATTENTION is gone (issue 49): set, it is
// refused, naming --attention-backend. Only the apps read them: nothing below does.
#pragma once

#include <string>
#include <vector>

#include "train/train_config.h"

namespace gdn::app {

// Sets t's keys from the variables that are set; appends one warning per variable.
void take_deprecated_env(TrainConfig& t, std::vector<std::string>& warnings);

// For a tool without a run config (the benchmarks, gdn_kernel): the variables set the
// process-wide kernel choices directly; the warnings go to the log.
void apply_deprecated_env();

}  // namespace gdn::app
