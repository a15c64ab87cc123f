#include "train/run_identity.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "core/enum_names.h"
#include "core/error.h"
#include "train/optimizer.h"

namespace gdn {

namespace {

using nlohmann::json;

constexpr const char* kOptimizerKeys[] = {"lr", "warmup_steps", "weight_decay", "grad_clip"};

// What the config hash covers: the model, and the optimizer settings of "train".
json hashed_config(const json& config) {
  json out{{"model", config.value("model", json::object())}, {"train", json::object()}};
  const json train = config.value("train", json::object());
  for (const char* k : kOptimizerKeys)
    if (train.contains(k)) out["train"][k] = train[k];
  return out;
}

// FNV-1a over the canonical text (nlohmann's objects keep their keys sorted).
std::string hash_text(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string value_text(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// The keys under which two configs' hashed parts differ: "model.rope_theta 10000 vs 1e6".
void config_differences(const json& a, const json& b, const std::string& prefix,
                        std::vector<std::string>& out) {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it)
      config_differences(it.value(), b.contains(it.key()) ? b[it.key()] : json(),
                         prefix + (prefix.empty() ? "" : ".") + it.key(), out);
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key()))
        config_differences(json(), it.value(), prefix + (prefix.empty() ? "" : ".") + it.key(),
                           out);
  } else if (a != b) {
    out.push_back(prefix + " " + (a.is_null() ? "(none)" : value_text(a)) + " vs " +
                  (b.is_null() ? "(none)" : value_text(b)));
  }
}

// Two spellings of one data path ("./I/d.txt", "I/d.txt", through a link), resolved from
// the working directory.
bool same_data(const json& a, const json& b) {
  if (!a.is_string() || !b.is_string()) return false;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path x = fs::weakly_canonical(fs::absolute(a.get<std::string>(), ec), ec);
  const fs::path y = fs::weakly_canonical(fs::absolute(b.get<std::string>(), ec), ec);
  return !ec && x == y;
}

// A number or string of the saved train config, else `fallback` (a run from before the key
// existed used the default).
template <typename V>
V saved_value(const json& train, const char* key, V fallback) {
  const auto it = train.find(key);
  if (it == train.end()) return fallback;
  if constexpr (std::is_same_v<V, std::string>)
    return it->is_string() ? it->get<V>() : fallback;
  else
    return it->is_number() ? it->get<V>() : fallback;
}

// Where the learning rates of the steps a checkpoint took differ between its schedule and
// this run's: the first such step and the schedule keys that differ; "" when none does. lr
// and warmup_steps are this run's on both sides (their changes are the config hash's).
std::string schedule_difference(const json& saved_config, std::int64_t taken,
                                const TrainConfig& t) {
  const json train = saved_config.value("train", json::object());
  TrainConfig was = t;
  was.steps = saved_value(train, "steps", t.steps);
  was.min_lr = saved_value(train, "min_lr", -1.0);
  was.decay_fraction = saved_value(train, "decay_fraction", 0.2);
  const std::string name = saved_value(train, "lr_schedule", std::string("cosine"));
  was.lr_schedule = LrSchedule::cosine;
  const auto names = enum_names(LrSchedule{});
  for (std::size_t i = 0; i < names.size(); ++i)
    if (name == names[i]) was.lr_schedule = LrSchedule(i);
  const AdamWConfig a = adamw_config(was), b = adamw_config(t);
  for (std::int64_t s = 0; s < taken; ++s) {
    const double la = learning_rate(a, s), lb = learning_rate(b, s);
    if (la == lb) continue;
    std::vector<std::string> keys;
    config_differences(json{{"steps", was.steps},
                            {"lr_schedule", name_of(was.lr_schedule)},
                            {"min_lr", was.min_lr},
                            {"decay_fraction", was.decay_fraction}},
                       json{{"steps", t.steps},
                            {"lr_schedule", name_of(t.lr_schedule)},
                            {"min_lr", t.min_lr},
                            {"decay_fraction", t.decay_fraction}},
                       "train", keys);
    std::string list;
    for (const std::string& k : keys) list += "; " + k;
    char lrs[64];
    std::snprintf(lrs, sizeof lrs, "%.6g vs %.6g", la, lb);
    return "schedule (the lr of step " + std::to_string(s) + ", one of the " +
           std::to_string(taken) + " taken, would change: " + lrs + list + ")";
  }
  return "";
}

}  // namespace

const std::vector<std::string>& accepted_change_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k = run_identity_keys();
    k.push_back("schedule");
    return k;
  }();
  return keys;
}

const std::vector<std::string>& run_identity_keys() {
  static const std::vector<std::string> keys{"seed",       "data",      "data_bytes", "seq_len",
                                             "batch_size", "documents", "config"};
  return keys;
}

json run_identity(const RunConfig& cfg, const TokenSource& data) {
  const TrainConfig& t = cfg.train;
  return json{{"seed", t.seed},
              {"data", t.data},
              {"data_bytes", data.stored_bytes()},
              {"seq_len", t.seq_len},
              {"batch_size", t.batch_size},
              {"documents", name_of(t.documents)},
              {"config", hash_text(hashed_config(to_json(cfg)).dump())}};
}

IdentityDifferences compare_run_identity(const json& saved_config, const RunConfig& cfg,
                                         const json& identity, std::int64_t taken,
                                         const std::vector<std::string>& accepted) {
  IdentityDifferences out;
  if (!saved_config.is_object() || !saved_config.contains("run")) return out;
  const json& saved = saved_config["run"];
  for (const std::string& k : run_identity_keys()) {
    const json a = saved.value(k, json()), b = identity.value(k, json());
    if (a == b || (k == "data" && same_data(a, b))) continue;
    std::vector<std::string> lines;
    if (k == "config") {
      std::vector<std::string> keys;
      config_differences(hashed_config(saved_config), hashed_config(to_json(cfg)), "", keys);
      std::string list;
      for (const std::string& x : keys) list += (list.empty() ? "" : ", ") + x;
      lines.push_back("config (" +
                      (list.empty() ? "hash " + value_text(a) + " vs " + value_text(b) : list) +
                      ")");
    } else {
      lines.push_back(k + " " + value_text(a) + " vs " + value_text(b));
    }
    const bool ok = std::find(accepted.begin(), accepted.end(), k) != accepted.end();
    for (std::string& l : lines) (ok ? out.accepted : out.refused).push_back(std::move(l));
    if (!ok) out.refused_keys.push_back(k);
  }
  const std::string schedule = schedule_difference(saved_config, taken, cfg.train);
  if (!schedule.empty()) {
    const bool ok = std::find(accepted.begin(), accepted.end(), "schedule") != accepted.end();
    (ok ? out.accepted : out.refused).push_back(schedule);
    if (!ok) out.refused_keys.push_back("schedule");
  }
  return out;
}

std::vector<std::string> parse_accepted_changes(const std::string& list) {
  std::vector<std::string> out;
  std::string keys;
  for (const std::string& k : accepted_change_keys()) keys += (keys.empty() ? "" : ", ") + k;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t end = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, end - pos);
    const auto& all = accepted_change_keys();
    GDN_CHECK(std::find(all.begin(), all.end(), item) != all.end(), "--accept-changes '", list,
              "': '", item,
              "' is not a key of a run's identity; expected a comma-separated list "
              "of ",
              keys);
    out.push_back(item);
    pos = end + 1;
  }
  return out;
}

}  // namespace gdn
