// The model's architecture, read from the "model" object of a run config, which uses the
// Hugging Face Qwen3NextConfig key names: a Hugging Face config.json works as "model"
// unchanged. Keys gdn-cp does not use are listed (the app warns once); an architectural
// key asking for something gdn-cp cannot build is refused, never ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gdn {

// The token mixer of a layer (Hugging Face's layer_types values).
enum class LayerType { linear_attention };
const char* layer_type_name(LayerType t);

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
  // One per layer; empty means every layer is linear_attention.
  std::vector<LayerType> layer_types;

  LayerType layer_type(int layer) const {
    return layer_types.empty() ? LayerType::linear_attention : layer_types.at(layer);
  }
};

// Parses and checks types and ranges; errors name the file, the key, the value and what
// was expected. Keys that are not used are appended to `ignored`.
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source,
                               std::vector<std::string>& ignored);
nlohmann::json to_json(const ModelConfig& m);

// The architectural differences between two configs, one "key: a vs b" line each (empty
// when they describe the same model). initializer_range only shapes the initial weights,
// so it is not one of them.
std::vector<std::string> architecture_differences(const ModelConfig& a, const ModelConfig& b);

}  // namespace gdn
