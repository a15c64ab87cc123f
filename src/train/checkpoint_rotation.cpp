#include "train/checkpoint_rotation.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace gdn {

CheckpointRotation::CheckpointRotation(std::string dir, int keep,
                                       const std::vector<CheckpointFile>& files,
                                       const NotOurs& not_ours)
    : dir_(std::move(dir)), keep_(keep) {
  for (const CheckpointFile& f : files) {
    // The problems of unloadable files name the file already.
    const std::string why = f.problem.empty() ? not_ours(f.state) : f.problem;
    if (why.empty())
      ours_.emplace_back(f.step, f.path);
    else
      foreign_.emplace_back(f.path, f.problem.empty() ? "'" + f.path + "' " + why : why);
  }
  std::sort(ours_.begin(), ours_.end(), std::greater<>());
}

void CheckpointRotation::report() const {
  if (keep_ <= 0) return;  // nothing is deleted
  constexpr std::size_t kShown = 5;
  for (std::size_t i = 0; i < foreign_.size() && i < kShown; ++i)
    spdlog::warn(
        "checkpoint rotation (--keep-checkpoints {}) leaves alone a file that is not a "
        "checkpoint of this run: {}",
        keep_, foreign_[i].second);
  if (foreign_.size() > kShown)
    spdlog::warn(
        "checkpoint rotation leaves alone {} more files of {} that are not checkpoints "
        "of this run",
        foreign_.size() - kShown, dir_);
}

std::vector<std::string> CheckpointRotation::saved(std::int64_t step) {
  const std::string path = checkpoint_path(dir_, step);
  // The save replaced whatever had this name.
  std::erase_if(ours_, [&](const auto& x) { return x.second == path; });
  std::erase_if(foreign_, [&](const auto& x) { return x.first == path; });
  ours_.emplace_back(step, path);
  std::sort(ours_.begin(), ours_.end(), std::greater<>());
  std::vector<std::string> removed;
  if (keep_ <= 0) return removed;
  while (ours_.size() > std::size_t(keep_)) {
    const std::string old = ours_.back().second;
    ours_.pop_back();
    const std::string why = remove_checkpoint(old);
    if (why.empty())
      removed.push_back(old);
    else
      spdlog::warn("cannot delete old checkpoint {}: {}", old, why);
  }
  return removed;
}

}  // namespace gdn
