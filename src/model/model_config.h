// The model's architecture: a Hugging Face config of one of the three model families
// gdn-cp builds (Qwen3-Next, Qwen3.5, Qwen3.5-MoE), read with transformers' key names and
// transformers' defaults for absent keys, so a config.json from the Hub means here what
// it means to transformers. Qwen3.5's multimodal configs keep the text settings under
// "text_config"; only the text model is built. Every key that changes the math is
// honoured or refused with a message naming it; keys with no effect on the math (token
// ids, dtype, ...) are listed so the app can warn once. docs/design.md §6.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/enum_names.h"

namespace gdn {

// The token mixer of a layer (Hugging Face's layer_types values).
enum class LayerType { linear_attention, full_attention };
constexpr std::array<const char*, 2> enum_names(LayerType) {
  return {"linear_attention", "full_attention"};
}

// Which transformers model the config describes: decides the defaults, the parameter
// names and layouts of its checkpoints (hf_weights.h), and the router's renormalisation.
enum class ModelFamily {
  qwen3_next,   // Qwen3NextForCausalLM: in_proj_qkvz / in_proj_ba, optional MoE
  qwen3_5,      // Qwen3_5ForCausalLM: dense MLPs
  qwen3_5_moe,  // Qwen3_5MoeForCausalLM: MoE in every layer
};
constexpr std::array<const char*, 3> enum_names(ModelFamily) {
  return {"qwen3_next", "qwen3_5", "qwen3_5_moe"};
}

struct ModelConfig {
  ModelFamily family = ModelFamily::qwen3_next;
  // The config was Qwen3.5's multimodal wrapper (text_config inside): its checkpoints
  // name the text model's tensors "model.language_model.*" and hold "model.visual.*".
  bool multimodal = false;

  int vocab_size = 0;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int intermediate_size = 0;  // the dense MLPs (none in Qwen3.5-MoE)
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
  int pad_token_id = -1;  // -1: none. Its embedding row starts at zero and gets no gradient
  // -1: none. Where train.documents eos ends a document (it does not change the math, and
  // architecture_differences leaves it out).
  int eos_token_id = -1;

  // Gated DeltaNet layers.
  int linear_num_key_heads = 0;    // Hk
  int linear_num_value_heads = 0;  // Hv
  int linear_key_head_dim = 0;     // K
  int linear_value_head_dim = 0;   // V
  int linear_conv_kernel_dim = 4;  // W

  // Gated full-attention layers.
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  double rope_theta = 10000.0;
  double partial_rotary_factor = 0.25;
  bool attention_bias = false;

  // Sparse mixture of experts (num_experts == 0: dense MLPs everywhere).
  int num_experts = 0;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  int shared_expert_intermediate_size = 0;
  bool norm_topk_prob = true;  // renormalise the top-k router weights
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;
  double router_aux_loss_coef = 0.001;
  bool output_router_logits = false;  // add the load-balancing loss to the objective

  // One per layer (parse_model_config fills it; empty means every layer is GDN).
  std::vector<LayerType> layer_types;

  LayerType layer_type(int layer) const {
    return layer_types.empty() ? LayerType::linear_attention : layer_types.at(std::size_t(layer));
  }
  // Layer `layer` has the sparse MoE block (transformers' rule for each family).
  bool is_moe_layer(int layer) const;
  int num_moe_layers() const;
  int num_attention_layers() const;
  // The rotated part of each attention head: int(head_dim * partial_rotary_factor), as
  // transformers truncates it.
  int rotary_dim() const { return int(head_dim * partial_rotary_factor); }
};

// Parses and checks a Hugging Face config object (the "model" of a run file, or a bare
// config.json); `source` names it in messages. Keys with no effect on the math are
// appended to `ignored`; one-line notes about how a key was read (Qwen3.5's mRoPE) to
// `notes`.
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source,
                               std::vector<std::string>& ignored, std::vector<std::string>& notes);
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source);

// The text model's config with every key explicit, as transformers writes it
// (model_type qwen3_next, qwen3_5_text or qwen3_5_moe_text): parse_model_config reads it
// back to the same ModelConfig, and transformers' AutoModelForCausalLM builds it.
nlohmann::json to_json(const ModelConfig& m);

// "qwen3_next: 4 layers (3 GDN, 1 attention), MoE in 3 (8 experts, top 2), vocab 256".
std::string describe(const ModelConfig& m);

// The architectural differences between two configs, one "key: a vs b" line each (empty
// when they describe the same model). initializer_range only shapes the initial weights,
// so it is not one of them.
std::vector<std::string> architecture_differences(const ModelConfig& a, const ModelConfig& b);

}  // namespace gdn
