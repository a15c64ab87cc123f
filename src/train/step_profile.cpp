#include "train/step_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace gdn {

StepProfile to_step_profile(const std::map<std::string, profile::Entry>& recorded, double step_ms) {
  StepProfile out;
  double claimed = 0;
  for (const auto& [key, e] : recorded) {
    out[key] = 1000.0 * e.seconds;
    claimed += 1000.0 * e.seconds;
  }
  out["other"] = std::max(0.0, step_ms - claimed);
  return out;
}

std::vector<std::string> profile_table(const std::vector<StepProfile>& steps) {
  if (steps.empty()) return {};
  StepProfile mean, groups;
  for (const StepProfile& s : steps)
    for (const auto& [key, ms] : s) mean[key] += ms / double(steps.size());
  double total = 0;
  for (const auto& [key, ms] : mean) {
    total += ms;
    groups[key.substr(0, key.find('.'))] += ms;  // "gemm.moe" -> "gemm"
  }
  auto sorted = [](const StepProfile& m) {
    std::vector<std::pair<std::string, double>> v(m.begin(), m.end());
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    return v;
  };
  std::size_t width = 0;
  for (const auto& [key, ms] : mean) width = std::max(width, key.size());
  auto line = [&](const std::string& key, double ms) {
    return fmt::format("  {:<{}} {:>10.1f} ms {:>6.1f}%", key, width, ms,
                       total > 0 ? 100.0 * ms / total : 0.0);
  };
  std::vector<std::string> out;
  for (const auto& [key, ms] : sorted(mean)) out.push_back(line(key, ms));
  out.push_back(fmt::format("  by group ({:.1f} ms per step):", total));
  for (const auto& [key, ms] : sorted(groups)) out.push_back(line(key, ms));
  return out;
}

}  // namespace gdn
