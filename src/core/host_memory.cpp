#include "core/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace gdn {

namespace {

// The first integer in a file ("max" and unreadable files give -1).
std::int64_t read_number(const char* path) {
  std::ifstream in(path);
  std::int64_t v = -1;
  if (in >> v) return v;
  return -1;
}

std::int64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return -1;
}

// Room under the cgroup's memory limit (v2, then v1); -1 when there is no limit.
std::int64_t cgroup_room() {
  const std::int64_t max2 = read_number("/sys/fs/cgroup/memory.max");
  if (max2 > 0)
    return max2 - std::max<std::int64_t>(0, read_number("/sys/fs/cgroup/memory.current"));
  const std::int64_t max1 = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  // v1 reports "no limit" as a huge number.
  if (max1 > 0 && max1 < (std::int64_t(1) << 60))
    return max1 -
           std::max<std::int64_t>(0, read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes"));
  return -1;
}

}  // namespace

std::int64_t available_host_memory() {
  const std::int64_t a = mem_available(), b = cgroup_room();
  if (a < 0) return b;
  if (b < 0) return a;
  return std::min(a, b);
}

std::int64_t peak_resident_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return std::int64_t(u.ru_maxrss) * 1024;  // Linux reports KiB
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace gdn
