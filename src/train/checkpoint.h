// Checkpoints: parameters, AdamW moments, the step (which is also the data cursor) and
// the run's config, in one binary file per save, written atomically (temporary file,
// fsync, rename, fsync of the directory) so a crash never leaves a torn one. Parameters
// are replicated, so rank 0 writes, and a checkpoint saved at one cp/dp layout loads at
// any. A file holding a non-finite value is never written and never loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/params.h"

namespace gdn {

struct TrainingState {
  std::int64_t step = 0;     // steps completed; the next step to run
  std::string config_json;   // the run's config (to_json(RunConfig)): checked on resume
  DType dtype = DType::f32;  // of the stored values, f32 or f64 (set when read)
};

// Host copies of the flat parameter values and AdamW moments, in parameter order.
template <typename T>
struct CheckpointData {
  std::vector<T> values, m, v;
};

// Writes DIR/ckpt-<step, 8 digits>.bin atomically. Tensors are stored in T with names and
// shapes, plus a checksum of the whole file. Refuses (gdn::Error) a non-finite value.
template <typename T>
void save_checkpoint(const std::string& dir, const TrainingState& state,
                     const std::vector<ParamInfo>& params, const CheckpointData<T>& data);

// The newest checkpoint in dir that is complete, whose checksum verifies and whose values
// are all finite; nullopt when there is none. Skipped files get a warning when `warn`.
std::optional<std::string> latest_checkpoint(const std::string& dir, bool warn = true);

// Loads into `out`, converting from the stored dtype if it differs. Errors name the file
// and the first parameter whose name or shape differs from params; `out` is unchanged then.
template <typename T>
TrainingState load_checkpoint(const std::string& path, const std::vector<ParamInfo>& params,
                              CheckpointData<T>& out);

// DIR/ckpt-<step, 8 digits>.bin: where save_checkpoint writes the checkpoint of `step`.
std::string checkpoint_path(const std::string& dir, std::int64_t step);

// A file of a checkpoint directory named like a checkpoint (ckpt-<digits>.bin).
struct CheckpointFile {
  std::int64_t step = 0;  // from the name
  std::string path;
  bool gdn = false;     // it starts with the checkpoint magic: gdn-cp wrote it (maybe torn)
  std::string problem;  // why it is not a loadable checkpoint; "" when it is one
  TrainingState state;  // its step, config and dtype, when it is one
};

// Every file of dir named like a checkpoint, newest first, each read and verified as
// latest_checkpoint does (complete, checksum, finite values). Empty when dir is missing.
std::vector<CheckpointFile> scan_checkpoints(const std::string& dir);

// Makes sure checkpoints can be written to dir: creates it if missing, then writes and
// removes a probe file. Errors name the directory and the OS's reason.
void check_checkpoint_dir(const std::string& dir);

}  // namespace gdn
