// Run configuration from JSON: {"model": {...}, "train": {...}}.
// "model" uses the Hugging Face Qwen3NextConfig key names, so a Hugging Face config.json
// can be given as "model" as it is (the keys gdn-cp does not use are reported once).
// "train" is strict: an unknown key is an error (it catches typos).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gdn {

struct ModelConfig {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int intermediate_size = 0;
  int linear_num_key_heads = 0;    // Hk
  int linear_num_value_heads = 0;  // Hv
  int linear_key_head_dim = 0;     // K
  int linear_value_head_dim = 0;   // V
  int linear_conv_kernel_dim = 4;  // W
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
};

struct TrainConfig {
  std::int64_t seq_len = 0;
  int batch_size = 1;  // sequences per step, over all data-parallel groups
  int steps = 0;
  double lr = 1e-3;
  int warmup_steps = 0;
  double weight_decay = 0.0;
  double grad_clip = 1.0;  // 0: no clipping
  std::uint64_t seed = 0;
  std::string dtype = "f32";  // f32 | f64
  int cp = 1;
  int dp = 1;
  int chunk_size = 64;
  bool context_parallel_load_balance = false;  // MaxText's name; true is refused
  std::string data = "synthetic";              // "synthetic" or a path to a text file
  std::string log;                             // JSON-lines log file ("" = none)
  std::string checkpoint_dir;                  // "" = no checkpoints
  int checkpoint_every = 0;                    // steps; 0 = only at the end
};

struct RunConfig {
  ModelConfig model;
  TrainConfig train;
  std::vector<std::string> ignored_model_keys;  // present in "model" but not used
  std::string source;                           // file name, for messages
};

// Parses and checks types and ranges; errors name the file, the key, the value and what
// was expected. Does not check the layout against the world size (see validate_layout).
RunConfig parse_config(const nlohmann::json& j, const std::string& source);
RunConfig load_config(const std::string& path);

// Checks everything that depends on the mesh and model together: dp * cp == world_size,
// batch_size divisible by dp, seq_len >= cp, Hv % Hk == 0, chunk size, load balance.
void validate_layout(const RunConfig& c, int world_size);

nlohmann::json to_json(const RunConfig& c);

}  // namespace gdn
