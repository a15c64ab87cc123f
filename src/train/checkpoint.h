// Checkpoints in parts. The checkpoint of step S in DIR is a set of files:
//
//   DIR/ckpt-<S, 8 digits>.bin               the manifest: the step, the run's config, the
//                                            dtype, the parameter table and the parts
//   DIR/ckpt-<S, 8 digits>.bin.part-<r, 5>   rank r's part: runs of the whole model's flat
//                                            state (ParamInfo::global order), their values
//                                            and AdamW moments
//
// Each rank writes the runs it is responsible for; the manifest is written last, by rank
// 0, and records each part's runs, size and checksum. Every file is written atomically
// (temporary file, fsync, rename, fsync of the directory), so a set without its manifest
// is torn and never seen, and a part that is missing, short or from another save makes
// its checkpoint unloadable instead of mixing two saves. The runs of all parts cover
// every element once, so a checkpoint saved at one layout (world, cp, dp, ep, shard)
// loads at any, each rank reading only the parts that hold its runs. A non-finite value
// is never written and a part holding one is never loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/params.h"
#include "train/state_gather.h"

namespace gdn {

struct TrainingState {
  std::int64_t step = 0;     // steps completed; the next step to run
  std::string config_json;   // the run's config (to_json(RunConfig)): checked on resume
  DType dtype = DType::f32;  // of the stored values, f32 or f64 (set when read)
};

// One rank's part as the manifest records it. runs: (global, n) of each run, with `at`
// its place in the part's arrays.
struct CheckpointPart {
  std::string file;  // name within the checkpoint directory
  std::uint64_t bytes = 0, checksum = 0;
  std::vector<GlobalRun> runs;
};

// A part's entry as text and back (the manifest's form), for sending it to rank 0.
std::string to_entry_text(const CheckpointPart& part);
CheckpointPart part_from_entry_text(const std::string& text);

// Writes DIR/ckpt-<step>.bin.part-<rank> atomically: for each run (global, at, n) the
// elements [at, at + n) of values, m and v, stored in T. Refuses (gdn::Error, naming the
// parameter of `params`, the whole model's table) a non-finite value. Creates dir.
template <typename T>
CheckpointPart write_checkpoint_part(const std::string& dir, std::int64_t step, int rank,
                                     const std::vector<ParamInfo>& params,
                                     const std::vector<GlobalRun>& runs, const T* values,
                                     const T* m, const T* v);

// Writes the manifest DIR/ckpt-<step>.bin atomically, after every part is in place, then
// removes files of that step's name that are parts of no manifest (a torn earlier save).
// The parts' runs must cover the whole model once.
void write_checkpoint_manifest(const std::string& dir, const TrainingState& state, DType dtype,
                               const std::vector<ParamInfo>& params,
                               const std::vector<CheckpointPart>& parts);

// Loads the elements `want` asks for ((global, at, n): into [at, at + n) of values, m, v,
// converting from the stored dtype), reading only the parts that hold them. Errors name
// the file: a parameter table that differs from `params` (the first parameter whose name
// or shape differs), a part that is missing, torn, corrupt, of another save or holds a
// non-finite value. The outputs are unchanged then.
template <typename T>
TrainingState load_checkpoint(const std::string& manifest, const std::vector<ParamInfo>& params,
                              const std::vector<GlobalRun>& want, T* values, T* m, T* v);

// The whole state in the whole model's flat order, for a single process.
template <typename T>
struct CheckpointData {
  std::vector<T> values, m, v;
};
// One part (rank 0) and the manifest.
template <typename T>
void save_checkpoint(const std::string& dir, const TrainingState& state,
                     const std::vector<ParamInfo>& params, const CheckpointData<T>& data);
template <typename T>
TrainingState load_checkpoint(const std::string& manifest, const std::vector<ParamInfo>& params,
                              CheckpointData<T>& out);

// DIR/ckpt-<step, 8 digits>.bin: the manifest of the checkpoint of `step`.
std::string checkpoint_path(const std::string& dir, std::int64_t step);

// A file of a checkpoint directory named like a manifest (ckpt-<digits>.bin).
struct CheckpointFile {
  std::int64_t step = 0;  // from the name
  std::string path;
  bool gdn = false;  // it starts with the checkpoint magic: gdn-cp wrote it (maybe torn)
  // Another program's file, or another gdn-cp version's (magic or format): --resume
  // refuses it rather than skip it for an older checkpoint or a fresh start.
  bool foreign = false;
  std::string problem;  // why it is not a loadable checkpoint; "" when it is one
  TrainingState state;  // its step, config and dtype, when it is one
};

// Every file of dir named like a manifest, newest first, each checked without reading
// the parts' data: the manifest complete, its checksum right, every part there with its
// recorded size. Empty when dir is missing.
std::vector<CheckpointFile> scan_checkpoints(const std::string& dir);

// The newest checkpoint of scan_checkpoints that passes; nullopt when there is none.
// Skipped files get a warning when `warn`.
std::optional<std::string> latest_checkpoint(const std::string& dir, bool warn = true);

// Deletes a checkpoint: its manifest first (so a crash leaves a torn set, never a
// manifest without parts), then its parts. Returns "" or the OS's reason.
std::string remove_checkpoint(const std::string& manifest);

// Removes the temporaries of saves that were killed (".ckpt-N.bin.tmp",
// "ckpt-N.bin.part-R.tmp"), which nothing else removes; for the holder of dir's lock
// only. Returns how many.
int remove_checkpoint_temporaries(const std::string& dir);

// Makes sure checkpoints can be written to dir: creates it if missing, then writes and
// removes a probe file. Errors name the directory and the OS's reason.
void check_checkpoint_dir(const std::string& dir);

}  // namespace gdn
