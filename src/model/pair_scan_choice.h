// pair_scan auto, resolved once per layout (docs/design.md §3c), the same way by gdn_train,
// gdn_eval and gdn_plan: the faster of the two scans on a link (gdn/pairs/scan_cost.h),
// unless the all-gather's per-rank estimate does not fit the memory there is and the
// log-depth scan's does.
#pragma once

#include <cstdint>
#include <string>

#include "gdn/pairs/scan_cost.h"
#include "model/memory_estimate.h"
#include "model/model_config.h"

namespace gdn {

// One GDN layer's pairs over B rows of the config's value heads.
inline PairDims pair_dims(const ModelConfig& c, int B) {
  return {B * c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim};
}

// What one rank's step is estimated at (memory_estimate.h), to weigh the scans' memory.
struct EstimateInputs {
  const ModelConfig& model;
  ShardShape shape;  // its scan is ignored: each scan is tried
  int elem_bytes = 4;
  bool recompute = false;
  StateLayout state;
  bool bf16 = false;
};

// asked allgather or log_depth: taken as asked. automatic: see above; available < 0 means
// no limit, flops_per_s 0 prices the folding at nothing.
PairScanChoice resolve_pair_scan(PairScan asked, const EstimateInputs& in,
                                 std::int64_t available = -1, const ScanLink& link = {},
                                 double flops_per_s = 0);

}  // namespace gdn
