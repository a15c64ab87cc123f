#include "train/checkpoint_set.h"

#include <spdlog/spdlog.h>

#include "comm/call_sites.h"
#include "core/error.h"

namespace gdn {
namespace {

constexpr int kTag = 32;
constexpr char kFailed[] = "!";  // leads a failed rank's answer (an entry is a JSON object)

}  // namespace

template <typename T>
void save_checkpoint_set(Communicator& world, const std::string& dir, const TrainingState& state,
                         const std::vector<ParamInfo>& params, const std::vector<GlobalRun>& runs,
                         const T* values, const T* m, const T* v) {
  const char* site = train_sites::kCheckpointGather;
  // A part's entry ("" for a rank with nothing to write), or kFailed and why: a rank that
  // cannot write its part still answers, so rank 0 never waits for it.
  std::string mine;
  try {
    if (!runs.empty())
      mine = to_entry_text(
          write_checkpoint_part(dir, state.step, world.rank(), params, runs, values, m, v));
  } catch (const std::exception& e) {
    mine = kFailed + std::string(e.what());
  }
  if (world.rank() != 0) {
    const std::int64_t len = std::int64_t(mine.size());
    world.send(&len, sizeof len, 0, kTag, site);
    world.send(mine.data(), mine.size(), 0, kTag, site);
    GDN_CHECK(mine.rfind(kFailed, 0) != 0, mine.substr(1));
    return;
  }
  std::vector<CheckpointPart> parts;
  std::string failed;  // the first rank's reason
  for (int r = 0; r < world.size(); ++r) {
    std::string text = mine;
    if (r > 0) {
      std::int64_t len = 0;
      world.recv(&len, sizeof len, r, kTag, site);
      text.assign(std::size_t(len), '\0');
      world.recv(text.data(), text.size(), r, kTag, site);
    }
    if (text.rfind(kFailed, 0) == 0) {
      if (failed.empty()) failed = "rank " + std::to_string(r) + ": " + text.substr(1);
    } else if (!text.empty()) {
      parts.push_back(part_from_entry_text(text));
    }
  }
  GDN_CHECK(failed.empty(), failed);
  write_checkpoint_manifest(dir, state, dtype_of<T>(), params, parts);
}

template <typename T>
std::optional<LoadedCheckpoint> load_newest_checkpoint(
    Communicator& world, const std::string& dir, const std::vector<ParamInfo>& params,
    const std::vector<GlobalRun>& want, T* values, T* m, T* v,
    const std::function<void(const CheckpointFile&)>& accept) {
  const char* site = train_sites::kCheckpointGather;
  const std::vector<CheckpointFile> files = scan_checkpoints(dir);
  // Every rank sees the same directory; should one see fewer files, all stop there.
  std::int64_t count = std::int64_t(files.size());
  count = -count;
  world.all_reduce_max(&count, 1, site);
  count = -count;
  for (std::size_t i = 0; i < std::size_t(count); ++i) {
    const CheckpointFile& f = files[i];
    if (f.foreign)
      throw_error("--resume: ", f.problem,
                  ". Resume with the gdn-cp that wrote it, or start afresh in another "
                  "--checkpoint-dir");
    if (!f.problem.empty()) {
      if (world.rank() == 0) spdlog::warn("skipping checkpoint {}: {}", f.path, f.problem);
      continue;
    }
    accept(f);
    std::string why;
    TrainingState state;
    try {
      state = load_checkpoint(f.path, params, want, values, m, v);
    } catch (const Error& e) {
      why = e.what();
    }
    // The lowest rank that could not read its runs, as a max of its distance from the
    // end (0: every rank could).
    std::int64_t failed = why.empty() ? 0 : world.size() - world.rank();
    world.all_reduce_max(&failed, 1, site);
    if (failed == 0) return LoadedCheckpoint{f.path, state};
    if (world.rank() == world.size() - failed)
      spdlog::warn("skipping checkpoint {}: {}", f.path, why);
  }
  GDN_CHECK(count == 0, "--resume: none of the ", count, " checkpoints in '", dir,
            "' could be loaded (each is named above with why); a fresh start would replace "
            "them. Move them away, or pass --overwrite-checkpoints without --resume to start "
            "afresh");
  return std::nullopt;
}

#define GDN_CHECKPOINT_SET_INSTANTIATE(T)                                                     \
  template void save_checkpoint_set<T>(                                                       \
      Communicator&, const std::string&, const TrainingState&, const std::vector<ParamInfo>&, \
      const std::vector<GlobalRun>&, const T*, const T*, const T*);                           \
  template std::optional<LoadedCheckpoint> load_newest_checkpoint<T>(                         \
      Communicator&, const std::string&, const std::vector<ParamInfo>&,                       \
      const std::vector<GlobalRun>&, T*, T*, T*,                                              \
      const std::function<void(const CheckpointFile&)>&);
GDN_CHECKPOINT_SET_INSTANTIATE(float)
GDN_CHECKPOINT_SET_INSTANTIATE(double)
#undef GDN_CHECKPOINT_SET_INSTANTIATE

}  // namespace gdn
