// The step line's model FLOP/s and MFU for gdn_train (train/step_log.h's ModelFlopRate):
// the model FLOPs of a step from gdn_plan's count, and the peak they are set against.
#pragma once

#include <string>

#include "common/device_flag.h"
#include "train/run_config.h"
#include "train/step_log.h"

namespace gdn::app {

struct FlopRateChoice {
  ModelFlopRate rate;
  std::string peak_source;  // for the start-up line: where the peak comes from, or why none
  double predicted_ms = 0;  // gdn_plan's compute time of the busiest rank at the peak
};

// flops_per_step: plan::count_flops's step at cp 1 (forward + backward, no recomputation);
// the peak per rank: `peak_tflops` when > 0, else on cuda the GPU's by name (plan/peak.h;
// none for a GPU not in the table), else this CPU's FMA peak, measured for 0.2 s on this
// rank's threads (twice the float one for bf16 where the CPU has AVX512_BF16's dot product,
// which the bf16 GEMM runs on).
FlopRateChoice model_flop_rate(const RunConfig& cfg, Device device, double peak_tflops);

}  // namespace gdn::app
