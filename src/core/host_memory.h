// How much memory this process may still allocate on the host: the smaller of the
// kernel's MemAvailable and the room left under the cgroup's limit (containers, Slurm).
#pragma once

#include <cstdint>

namespace gdn {

// Bytes; -1 when neither source could be read.
std::int64_t available_host_memory();

// This process's peak resident set so far (the kernel's high-water mark), in bytes.
std::int64_t peak_resident_bytes();
// CPU time this process has used so far (user + system, every thread), in seconds.
double process_cpu_seconds();

}  // namespace gdn
