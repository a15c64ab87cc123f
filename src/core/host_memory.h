// How much memory this process may still allocate on the host: the smaller of the
// kernel's MemAvailable and the room left under the cgroup's limit (containers, Slurm).
#pragma once

#include <cstdint>

namespace gdn {

// Bytes; -1 when neither source could be read.
std::int64_t available_host_memory();

}  // namespace gdn
