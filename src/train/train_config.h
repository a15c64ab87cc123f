// The "train" object of a run config, and gdn_train's flags for it. One table of fields
// (train_fields()) drives everything: JSON parsing with the range checks, the flags with
// exactly the same checks, to_json, and the --help text. A message names where the bad
// value came from: "train.batch_size in FILE" or "--batch".
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "gdn/chunk/launch_counts.h"
#include "gdn/pairs/scan_cost.h"
#include "gdn/problem.h"
#include "model/param_partition.h"
#include "ops/attention/attention.h"

namespace gdn {

// Activation recomputation: none, or each layer's forward run again before its backward.
enum class Recompute { none, layer };
constexpr std::array<const char*, 2> enum_names(Recompute) {
  return {"none", "layer"};
}

// Attention's layer-local load balance: none, or stripes r and 2P - 1 - r per cp rank.
enum class AttentionLoadBalance { none, layer_local };
constexpr std::array<const char*, 2> enum_names(AttentionLoadBalance) {
  return {"none", "layer_local"};
}

// The learning rate after warmup (train/optimizer.h): cosine or linear decay to min_lr,
// constant, or warmup-stable-decay (wsd: constant, then a linear decay to min_lr over the
// last decay_fraction of the steps).
enum class LrSchedule { cosine, linear, constant, wsd };
constexpr std::array<const char*, 4> enum_names(LrSchedule) {
  return {"cosine", "linear", "constant", "wsd"};
}

// Document boundaries inside a window (cp/documents.h): none (each window is one
// sequence), or eos: documents end after model.eos_token_id, or where a Megatron index
// (a .bin/.idx dataset) says they end.
enum class DocumentSplit { none, eos };
constexpr std::array<const char*, 2> enum_names(DocumentSplit) {
  return {"none", "eos"};
}

struct TrainConfig {
  std::int64_t seq_len = 0;
  int batch_size = 1;  // sequences per step, over all data-parallel groups
  int grad_accum = 1;  // micro-batches per step and dp group (train/run.h)
  int steps = 0;
  double lr = 1e-3;
  int warmup_steps = 0;
  LrSchedule lr_schedule = LrSchedule::cosine;
  double min_lr = -1;           // the decay's floor; negative: lr / 10 (the default)
  double decay_fraction = 0.2;  // wsd: the share of the steps that decays
  double weight_decay = 0.0;
  double grad_clip = 1.0;  // 0: no clipping
  std::uint64_t seed = 0;
  DType dtype = DType::f32;  // f32 | f64 | bf16 (mixed precision: f32 values)
  int cp = 1;
  int dp = 1;
  int ep = 1;  // expert-parallel degree, folded onto the dp x cp ranks
  int chunk_size = kDefaultChunkSize;
  bool context_parallel_load_balance = false;  // MaxText's name; true is refused
  AttentionLoadBalance attention_load_balance = AttentionLoadBalance::none;
  PairScan pair_scan = PairScan::automatic;  // how GDN layers scan their pairs (cp_context.h)
  Recompute recompute = Recompute::none;
  Sharding shard = Sharding::none;
  std::string data = "synthetic";  // "synthetic", a token file or a text file
  DocumentSplit documents = DocumentSplit::none;
  std::string eval_data;       // validation file ("" = none; train/eval_windows.h)
  int eval_every = 0;          // validate every N steps; 0: after the last step only
  int eval_sequences = 32;     // the first K windows of eval_data
  std::string log;             // JSON-lines log file ("" = none)
  std::string checkpoint_dir;  // "" = no checkpoints
  int checkpoint_every = 0;    // steps; 0 = only at the end
  int keep_checkpoints = 3;    // the newest N complete ones; 0 = all
  double watchdog_s = 600;     // no progress this long ends the job; 0 = off
  bool profile = false;        // wall time per component of each step (core/profile.h)
  // Which kernels run (train/run_layout.h resolves them once, at start-up): the host GEMM
  // path (auto: the widest this CPU runs; ops/gemm/gemm_path.h), the CUDA GDN walks, TF32
  // for the CUDA GDN chunk GEMMs in fp32, and the CUDA attention kernels.
  std::string gemm_path = "auto";
  pass::CudaWalk cuda_walk = pass::CudaWalk::automatic;
  bool cuda_tf32 = false;
  ops::AttentionBackend attention_backend = ops::AttentionBackend::automatic;

  // Where each key was last set: "--batch", or "train.batch_size in FILE". Absent: default.
  std::map<std::string, std::string> set_by;
  // " (--batch)" for messages about a key's value, or "" when it is the default.
  std::string origin(const std::string& key) const;
};

struct TrainField {
  using Member = std::variant<
      std::int64_t TrainConfig::*, int TrainConfig::*, std::uint64_t TrainConfig::*,
      double TrainConfig::*, bool TrainConfig::*, std::string TrainConfig::*, DType TrainConfig::*,
      Recompute TrainConfig::*, AttentionLoadBalance TrainConfig::*, PairScan TrainConfig::*,
      Sharding TrainConfig::*, DocumentSplit TrainConfig::*, pass::CudaWalk TrainConfig::*,
      ops::AttentionBackend TrainConfig::*, LrSchedule TrainConfig::*>;
  const char* key;   // in "train"
  const char* flag;  // gdn_train's flag, without "--"; "" for none
  const char* help;
  Member member;
  double lo = 0, hi = 0;                  // numbers: the allowed range (hi = 0: no upper bound)
  bool lo_open = false;                   // numbers: lo itself is excluded
  std::vector<std::string> choices = {};  // strings, enums: the allowed names (empty: any, all)
  bool nonempty = false;                  // strings: "" is refused
};

const std::vector<TrainField>& train_fields();
const TrainField* find_train_field(const std::string& key);

// Sets one field from a JSON value of the config file `source`, or from the text of its
// flag, with the field's checks. Errors name the key or the flag, the value and what was
// expected; set_by records where the value came from.
void set_train_field(TrainConfig& t, const TrainField& f, const nlohmann::json& value,
                     const std::string& source);
void set_train_field_text(TrainConfig& t, const TrainField& f, const std::string& text);

// Parses a whole "train" object (unknown keys are errors, with a suggestion).
TrainConfig parse_train_config(const nlohmann::json& j, const std::string& source);
nlohmann::json to_json(const TrainConfig& t);

}  // namespace gdn
