// A run config: {"model": {...}, "train": {...}} (model/model_config.h, train_config.h),
// or a bare Hugging Face config.json with the train settings from a second file or flags;
// then flags on top (apps/gdn_train), then the checks that need the mesh and the model
// together.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "train/train_config.h"

namespace gdn {

struct RunConfig {
  ModelConfig model;
  TrainConfig train;
  std::vector<std::string> ignored_model_keys;  // present in "model" but not used
  std::vector<std::string> model_notes;         // how a key was read (one line each)
  std::string source;                           // file name, for messages
};

// Parses and checks types and ranges; errors name the file, the key, the value and what
// was expected. Does not check the layout against the world size (see validate_layout).
// j is a run file, or a Hugging Face config (it has "model_type" at the top), whose train
// settings come from `train` ({"train": {...}} or the bare object; null: defaults and
// flags only). A run file with its own "train" and a second one is refused as ambiguous.
RunConfig parse_config(const nlohmann::json& j, const std::string& source,
                       const nlohmann::json& train = nullptr, const std::string& train_source = "");
// train_path "" when there is no train file.
RunConfig load_config(const std::string& path, const std::string& train_path = "");

// Checks everything that depends on the mesh and model together: dp * cp == world_size,
// batch_size divisible by dp, seq_len >= cp, Hv % Hk == 0, ep dividing the world and the
// experts (of a MoE model), chunk size, load balance.
// Messages name where each value came from (the key in the file, or the flag).
void validate_layout(const RunConfig& c, int world_size);

nlohmann::json to_json(const RunConfig& c);

}  // namespace gdn
