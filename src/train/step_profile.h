// The profile of the training steps (--profile): one step's components in milliseconds,
// and the table gdn_train prints from them. The recording is core/profile.h's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/profile.h"

namespace gdn {

// One step's components in ms, plus "other": the step's wall time no scope claimed
// (the step's own bookkeeping, and any work not yet scoped).
using StepProfile = std::map<std::string, double>;
StepProfile to_step_profile(const std::map<std::string, profile::Entry>& recorded, double step_ms);

// The mean of the given steps per component, largest first, as text lines:
// "  gemm.moe   1234.5 ms  25.1%", then one line per group (gemm, elementwise, comm, ...)
// summed over its kinds. Empty without steps.
std::vector<std::string> profile_table(const std::vector<StepProfile>& steps);

}  // namespace gdn
