// The JSON-lines log of the steps (train.log): one object per step, {"step": i, ...} with
// i 0-based. A run killed after logging steps past its last checkpoint runs those steps
// again when resumed; the log must not hold them twice.
#pragma once

#include <cstdint>
#include <string>

namespace gdn {

// Keeps the lines of steps < `step` (the checkpoint's step: the next step to run) and
// drops the rest, and any line that is not a step record (one torn by the kill), by
// writing the kept lines to a temporary file and renaming it over the log (a crash
// leaves the old log or the new one). Returns the number of lines dropped; a missing log,
// or one that is not a regular file (/dev/stdout), is left alone (0). Errors name the file.
std::int64_t truncate_step_log(const std::string& path, std::int64_t step);

}  // namespace gdn
