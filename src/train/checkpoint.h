// Checkpoints: parameters, AdamW moments, the step (which is also the data cursor) and
// the RNG state, in one binary file per save, written atomically (temporary file, fsync,
// rename, fsync of the directory) so a crash never leaves a torn one. Parameters are
// replicated, so rank 0 writes and a checkpoint saved at one cp/dp layout loads at any.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/params.h"
#include "train/optimizer.h"

namespace gdn {

struct TrainingState {
  std::int64_t step = 0;        // steps completed; the next step to run
  std::uint64_t rng_state = 0;  // trainer RNG state (for anything stochastic)
  std::string config_json;      // the run's config, for the record
};

// Writes DIR/ckpt-<step, 8 digits>.bin atomically. Tensors are stored in T with names and
// shapes, plus a checksum of the whole file.
template <typename T>
void save_checkpoint(const std::string& dir, const TrainingState& state,
                     const ParamStore<T>& params, const AdamW<T>& opt);

// The newest checkpoint in dir that is complete and whose checksum verifies (torn or
// corrupt files are skipped with a warning); nullopt when there is none.
std::optional<std::string> latest_checkpoint(const std::string& dir);

// Loads into params and opt, converting from the stored dtype if it differs. Errors name
// the file and the first parameter whose name or shape differs from the model's.
template <typename T>
TrainingState load_checkpoint(const std::string& path, ParamStore<T>& params, AdamW<T>& opt);

}  // namespace gdn
