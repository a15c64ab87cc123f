// What makes a run this run, recorded in each checkpoint's config (under "run") and
// compared on --resume: a checkpoint of another run (another seed, data, seq_len, batch,
// documents mode, or model and optimizer settings) is refused, naming each difference,
// unless the user says the change is intended (--accept-changes).
//
// Not part of it, because a checkpoint continues the same run under them: steps (a
// longer run goes on; the schedule's total follows the flag, and a schedule that would
// give a step already taken another lr is refused as "schedule": a longer cosine run, not
// a longer wsd run still before its decay), the layout (dp, cp, ep,
// shard: a checkpoint loads at any), dtype (converted, with a warning), recompute,
// chunk_size, attention_load_balance and pair_scan (the same math), and where the run writes
// (log, checkpoint_every, keep_checkpoints, watchdog, profile).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/data.h"
#include "train/run_config.h"

namespace gdn {

// The keys of a run's identity, in the order messages name them.
const std::vector<std::string>& run_identity_keys();

// {"seed", "data", "data_bytes", "seq_len", "batch_size", "documents", "config"}: config
// is a hash of the model config and the optimizer settings (lr, warmup_steps,
// weight_decay, grad_clip).
nlohmann::json run_identity(const RunConfig& cfg, const TokenSource& data);

struct IdentityDifferences {
  std::vector<std::string> refused;   // "seed 1 vs 2", ... (checkpoint vs this run)
  std::vector<std::string> accepted;  // the same, for the keys in `accepted`
  std::vector<std::string> refused_keys;
};

// Compares the identity and config a checkpoint recorded (`saved_config`: the checkpoint's
// config JSON, with "run") with this run's. A config difference names the keys behind it
// (model.rope_theta 10000 vs 1000000). A checkpoint with no "run" gives no differences.
// Then the schedule: the lr of each of the `taken` steps under the checkpoint's steps,
// lr_schedule, min_lr and decay_fraction against this run's ("schedule").
IdentityDifferences compare_run_identity(const nlohmann::json& saved_config, const RunConfig& cfg,
                                         const nlohmann::json& identity, std::int64_t taken,
                                         const std::vector<std::string>& accepted);

// What --accept-changes takes: the identity's keys and "schedule".
const std::vector<std::string>& accepted_change_keys();

// "seed,data" -> {"seed", "data"}; errors name --accept-changes and the keys it takes.
std::vector<std::string> parse_accepted_changes(const std::string& list);

}  // namespace gdn
