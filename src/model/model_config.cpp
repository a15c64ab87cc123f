#include "model/model_config.h"

#include <algorithm>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/json_reader.h"

namespace gdn {

namespace {

using nlohmann::json;
using Keys = std::vector<std::string>;

bool is_one_of(const std::string& key, const Keys& keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// transformers' defaults (configuration_qwen3_next.py, configuration_qwen3_5.py,
// configuration_qwen3_5_moe.py) for the keys whose default differs between families.
struct Defaults {
  int vocab, hidden, intermediate, layers, heads, kv_heads;
  int experts, experts_per_tok;
};
Defaults defaults_of(ModelFamily f) {
  switch (f) {
    case ModelFamily::qwen3_next:
      return {151936, 2048, 5632, 48, 16, 2, 512, 10};
    case ModelFamily::qwen3_5:
      return {248320, 4096, 12288, 32, 16, 4, 0, 0};
    case ModelFamily::qwen3_5_moe:
      return {248320, 2048, 0, 40, 16, 2, 256, 8};
  }
  throw_error("defaults_of: family ", int(f));
}

// The keys every family reads. Token ids other than pad_token_id and eos_token_id (train.
// documents eos), dtype, use_cache and the like are not here: they do not change the math
// and are reported as ignored.
const Keys kCommonKeys = {"model_type",
                          "vocab_size",
                          "hidden_size",
                          "num_hidden_layers",
                          "num_attention_heads",
                          "num_key_value_heads",
                          "head_dim",
                          "hidden_act",
                          "initializer_range",
                          "rms_norm_eps",
                          "tie_word_embeddings",
                          "rope_parameters",
                          "rope_scaling",
                          "rope_theta",
                          "partial_rotary_factor",
                          "attention_bias",
                          "attention_dropout",
                          "linear_conv_kernel_dim",
                          "linear_key_head_dim",
                          "linear_value_head_dim",
                          "linear_num_key_heads",
                          "linear_num_value_heads",
                          "layer_types",
                          "full_attention_interval",
                          "pad_token_id",
                          "eos_token_id",
                          "attn_output_gate"};
// The MoE keys of Qwen3.5-MoE; Qwen3-Next has these and three more.
const Keys kMoeKeys = {"num_experts",           "num_experts_per_tok",
                       "moe_intermediate_size", "shared_expert_intermediate_size",
                       "router_aux_loss_coef",  "output_router_logits"};
const Keys kNextOnlyMoeKeys = {"norm_topk_prob", "decoder_sparse_step", "mlp_only_layers"};
// Keys of other models that ask for something none of the three families computes.
const Keys kForeignKeys = {"sliding_window",         "use_sliding_window", "max_window_layers",
                           "quantization_config",    "qk_layernorm",       "attn_logit_softcapping",
                           "final_logit_softcapping"};

// A foreign key is accepted only with the value that asks for nothing (null, false, 0).
bool is_neutral(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v == 0);
}

// layer_types (a list of names, one per layer) or full_attention_interval (transformers'
// rule: layer i is full attention when (i + 1) % interval == 0; default 4).
std::vector<LayerType> parse_layer_types(const JsonSection& s, int layers) {
  std::vector<LayerType> out;
  if (s.has("layer_types") && !s.at("layer_types").is_null()) {
    const json& v = s.at("layer_types");
    if (!v.is_array() || int(v.size()) != layers)
      s.fail("layer_types", "a list of " + std::to_string(layers) +
                                " layer types (one per layer, num_hidden_layers)");
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string where = s.where("layer_types") + " (layer " + std::to_string(i) + ")";
      const std::optional<LayerType> t =
          v[i].is_string() ? enum_from_name<LayerType>(v[i].get<std::string>()) : std::nullopt;
      if (!t)
        throw_error(where, " = ", v[i].dump(),
                    ": expected \"linear_attention\" (Gated DeltaNet) or \"full_attention\" (gated "
                    "softmax attention)");
      out.push_back(*t);
    }
    return out;
  }
  const int every = s.has("full_attention_interval") ? s.int32("full_attention_interval", 1) : 4;
  for (int i = 0; i < layers; ++i)
    out.push_back((i + 1) % every ? LayerType::linear_attention : LayerType::full_attention);
  return out;
}

// rope_parameters (transformers 5; rope_scaling is its old name) wins over the older
// top-level rope_theta and partial_rotary_factor, as in transformers. Only the default
// RoPE is built; Qwen3.5's mRoPE sections are accepted: every text token has the same
// temporal, height and width position, so mRoPE computes plain RoPE.
void parse_rope(const JsonSection& s, ModelConfig& m, std::vector<std::string>& notes) {
  if (s.has("rope_theta")) m.rope_theta = s.real("rope_theta", 0.0, true);
  if (s.has("partial_rotary_factor"))
    m.partial_rotary_factor = s.real("partial_rotary_factor", 0.0, true);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!s.has(key) || s.at(key).is_null()) continue;
    const json& r = s.at(key);
    if (!r.is_object()) s.fail(key, "an object {\"rope_type\": \"default\", \"rope_theta\": ...}");
    const std::string where = s.where(key);
    // The RoPE variant first: its own keys ("factor", ...) are refused through it.
    for (const char* type_key : {"rope_type", "type"})
      if (r.contains(type_key))
        GDN_CHECK(r.at(type_key) == "default", where, ": rope_type ", r.at(type_key).dump(),
                  " is not built: gdn-cp computes the default RoPE only (rope_type \"default\")");
    for (const auto& [k, v] : r.items()) {
      if (k == "rope_type" || k == "type") {
        continue;
      } else if (k == "rope_theta") {
        GDN_CHECK(v.is_number() && v.get<double>() > 0, where, ": rope_theta = ", v.dump(),
                  ": expected a number > 0");
        m.rope_theta = v.get<double>();
      } else if (k == "partial_rotary_factor") {
        GDN_CHECK(v.is_number() && v.get<double>() > 0 && v.get<double>() <= 1, where,
                  ": partial_rotary_factor = ", v.dump(), ": expected a number in (0, 1]");
        m.partial_rotary_factor = v.get<double>();
      } else if (k == "mrope_section" || k == "mrope_interleaved") {
        if (k == "mrope_section")
          notes.push_back(where +
                          ": mRoPE sections read as plain RoPE (text tokens have equal "
                          "temporal, height and width positions, so mRoPE reduces to RoPE)");
      } else {
        throw_error(where, ": key '", k, "' = ", v.dump(),
                    " is not built: gdn-cp computes the default RoPE (rope_type, rope_theta, "
                    "partial_rotary_factor; mrope_section for Qwen3.5)");
      }
    }
  }
  GDN_CHECK(m.partial_rotary_factor <= 1.0, s.where("partial_rotary_factor"), " = ",
            m.partial_rotary_factor, ": expected a number in (0, 1]");
}

void parse_moe(const JsonSection& s, ModelFamily f, ModelConfig& m) {
  const Defaults d = defaults_of(f);
  m.num_experts = s.has("num_experts") ? s.int32("num_experts", 0) : d.experts;
  m.num_experts_per_tok =
      s.has("num_experts_per_tok") ? s.int32("num_experts_per_tok", 1) : d.experts_per_tok;
  m.moe_intermediate_size =
      s.has("moe_intermediate_size") ? s.int32("moe_intermediate_size", 1) : 512;
  m.shared_expert_intermediate_size = s.has("shared_expert_intermediate_size")
                                          ? s.int32("shared_expert_intermediate_size", 1)
                                          : 512;
  if (s.has("router_aux_loss_coef"))
    m.router_aux_loss_coef = s.real("router_aux_loss_coef", 0.0, false);
  if (s.has("output_router_logits")) m.output_router_logits = s.boolean("output_router_logits");
  if (f == ModelFamily::qwen3_next) {
    if (s.has("norm_topk_prob")) m.norm_topk_prob = s.boolean("norm_topk_prob");
    if (s.has("decoder_sparse_step")) m.decoder_sparse_step = s.int32("decoder_sparse_step", 1);
    if (s.has("mlp_only_layers") && !s.at("mlp_only_layers").is_null()) {
      const json& v = s.at("mlp_only_layers");
      if (!v.is_array()) s.fail("mlp_only_layers", "a list of layer indices");
      std::set<int> seen;
      for (const json& x : v) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
            x.get<std::int64_t>() >= m.num_hidden_layers || !seen.insert(x.get<int>()).second)
          s.fail("mlp_only_layers", "distinct layer indices in [0, " +
                                        std::to_string(m.num_hidden_layers) +
                                        ") (num_hidden_layers)");
        m.mlp_only_layers.push_back(x.get<int>());
      }
    }
  } else {
    // Qwen3.5-MoE has the MoE block in every layer and always renormalises the top-k
    // weights: these Qwen3-Next keys can only be accepted with the values that say so.
    if (s.has("norm_topk_prob") && s.at("norm_topk_prob") != true)
      s.fail("norm_topk_prob",
             "true (transformers' Qwen3.5-MoE router always renormalises "
             "the top-k weights)");
    if (s.has("decoder_sparse_step") && s.at("decoder_sparse_step") != 1)
      s.fail("decoder_sparse_step", "1 (Qwen3.5-MoE has the MoE block in every layer)");
    if (s.has("mlp_only_layers") && !s.at("mlp_only_layers").is_null() &&
        s.at("mlp_only_layers") != json::array())
      s.fail("mlp_only_layers", "[] (Qwen3.5-MoE has the MoE block in every layer)");
  }
  if (m.num_experts > 0)
    GDN_CHECK(m.num_experts_per_tok <= m.num_experts, s.where("num_experts_per_tok"), " = ",
              m.num_experts_per_tok, ": expected at most num_experts (", m.num_experts, ")");
  if (f == ModelFamily::qwen3_5_moe)
    GDN_CHECK(m.num_experts >= 1, s.where("num_experts"),
              " = 0: Qwen3.5-MoE needs experts (a dense Qwen3.5 is model_type qwen3_5)");
}

// model_type -> family; the multimodal wrappers hold the text model under text_config.
struct TypeInfo {
  ModelFamily family;
  bool multimodal;
};
TypeInfo type_info(const json& j, const std::string& source) {
  GDN_CHECK(j.contains("model_type"), "model_type is missing in ", source,
            ": expected \"qwen3_next\", \"qwen3_5\" or \"qwen3_5_moe\" (the Hugging Face model "
            "type; transformers' defaults for that type fill the absent keys)");
  const json& t = j.at("model_type");
  const std::string s = t.is_string() ? t.get<std::string>() : t.dump();
  if (s == "qwen3_next") return {ModelFamily::qwen3_next, false};
  if (s == "qwen3_5_text") return {ModelFamily::qwen3_5, false};
  if (s == "qwen3_5") return {ModelFamily::qwen3_5, true};
  if (s == "qwen3_5_moe_text") return {ModelFamily::qwen3_5_moe, false};
  if (s == "qwen3_5_moe") return {ModelFamily::qwen3_5_moe, true};
  throw_error("model_type = ", t.dump(), " in ", source,
              ": expected \"qwen3_next\", \"qwen3_5\", \"qwen3_5_text\", \"qwen3_5_moe\" or "
              "\"qwen3_5_moe_text\" (the models gdn-cp builds)");
}

ModelConfig parse_text_config(const json& j, const JsonSection& s, ModelFamily f,
                              std::vector<std::string>& ignored, std::vector<std::string>& notes) {
  const bool moe_family = f != ModelFamily::qwen3_5;
  for (const auto& [key, value] : j.items()) {
    if (is_one_of(key, kCommonKeys)) continue;
    if (key == "intermediate_size" && f != ModelFamily::qwen3_5_moe) continue;
    if (is_one_of(key, kMoeKeys) || is_one_of(key, kNextOnlyMoeKeys)) {
      if (moe_family) continue;
      throw_error(s.where(key), ": Qwen3.5 (model_type ", j.value("model_type", "qwen3_5"),
                  ") is dense and has no mixture of experts; a Qwen3.5 MoE model is model_type "
                  "qwen3_5_moe");
    }
    if (is_one_of(key, kForeignKeys)) {
      if (is_neutral(value)) continue;
      throw_error(s.where(key), " = ", value.dump(), ": not part of the ", name_of(f),
                  " architecture and not built by gdn-cp");
    }
    ignored.push_back(key);
  }

  const Defaults d = defaults_of(f);
  auto int_or = [&](const char* key, int lo, int fallback) {
    return s.has(key) ? s.int32(key, lo) : fallback;
  };
  ModelConfig m;
  m.family = f;
  m.vocab_size = int_or("vocab_size", 1, d.vocab);
  m.hidden_size = int_or("hidden_size", 1, d.hidden);
  m.num_hidden_layers = int_or("num_hidden_layers", 1, d.layers);
  if (f != ModelFamily::qwen3_5_moe)
    m.intermediate_size = int_or("intermediate_size", 1, d.intermediate);
  m.linear_num_key_heads = int_or("linear_num_key_heads", 1, 16);
  m.linear_num_value_heads = int_or("linear_num_value_heads", 1, 32);
  m.linear_key_head_dim = int_or("linear_key_head_dim", 1, 128);
  m.linear_value_head_dim = int_or("linear_value_head_dim", 1, 128);
  m.linear_conv_kernel_dim = int_or("linear_conv_kernel_dim", 1, 4);
  m.num_attention_heads = int_or("num_attention_heads", 1, d.heads);
  m.num_key_value_heads = int_or("num_key_value_heads", 1, d.kv_heads);
  m.head_dim = int_or("head_dim", 1, 256);
  if (s.has("rms_norm_eps")) m.rms_norm_eps = s.real("rms_norm_eps", 0.0, true);
  if (s.has("tie_word_embeddings")) m.tie_word_embeddings = s.boolean("tie_word_embeddings");
  if (s.has("initializer_range")) m.initializer_range = s.real("initializer_range", 0.0, false);
  if (s.has("attention_bias")) m.attention_bias = s.boolean("attention_bias");
  if (s.has("pad_token_id") && !s.at("pad_token_id").is_null())
    m.pad_token_id = s.int32("pad_token_id", 0, m.vocab_size - 1);
  if (s.has("eos_token_id") && !s.at("eos_token_id").is_null()) {
    // Some configs list several (the chat and the base model's ends): the first is taken.
    const json& v = s.at("eos_token_id");
    if (v.is_array() && !v.empty()) {
      const json first = v.front();
      GDN_CHECK(first.is_number_integer() && first.get<std::int64_t>() >= 0 &&
                    first.get<std::int64_t>() < m.vocab_size,
                s.where("eos_token_id"), " = ", v.dump(), ": expected token ids in [0, vocab_size ",
                m.vocab_size, ")");
      m.eos_token_id = first.get<int>();
      if (v.size() > 1)
        notes.push_back(s.where("eos_token_id") + " lists " + std::to_string(v.size()) +
                        " ids: documents end at the first, " + first.dump());
    } else {
      m.eos_token_id = s.int32("eos_token_id", 0, m.vocab_size - 1);
    }
  }
  if (s.has("hidden_act") && s.at("hidden_act") != "silu")
    s.fail("hidden_act", "\"silu\" (the activation of every Qwen3-Next and Qwen3.5 layer)");
  // Qwen3.5's checkpoints say attn_output_gate: true; transformers always gates.
  if (s.has("attn_output_gate") && s.at("attn_output_gate") != true)
    s.fail("attn_output_gate",
           "true (the attention output is always multiplied by sigmoid(gate) in "
           "transformers' Qwen3-Next and Qwen3.5 attention)");
  if (s.has("attention_dropout") && !is_neutral(s.at("attention_dropout")))
    s.fail("attention_dropout", "0 (gdn-cp trains without attention dropout)");
  parse_rope(s, m, notes);
  if (moe_family) parse_moe(s, f, m);
  m.layer_types = parse_layer_types(s, m.num_hidden_layers);

  if (m.num_attention_layers() > 0) {
    GDN_CHECK(m.num_attention_heads % m.num_key_value_heads == 0, s.where("num_attention_heads"),
              " = ", m.num_attention_heads, " is not a multiple of num_key_value_heads (",
              m.num_key_value_heads,
              "): each key-value head serves the same number of query heads");
    GDN_CHECK(m.rotary_dim() % 2 == 0, s.where("partial_rotary_factor"), " = ",
              m.partial_rotary_factor, " gives an odd rotary dimension int(head_dim ", m.head_dim,
              " * ", m.partial_rotary_factor, ") = ", m.rotary_dim(), ": expected an even one");
  }
  return m;
}

}  // namespace

bool ModelConfig::is_moe_layer(int layer) const {
  switch (family) {
    case ModelFamily::qwen3_5:
      return false;
    case ModelFamily::qwen3_5_moe:
      return true;
    case ModelFamily::qwen3_next:
      return num_experts > 0 && (layer + 1) % decoder_sparse_step == 0 &&
             std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) ==
                 mlp_only_layers.end();
  }
  return false;
}

int ModelConfig::num_moe_layers() const {
  int n = 0;
  for (int l = 0; l < num_hidden_layers; ++l) n += is_moe_layer(l);
  return n;
}

int ModelConfig::num_attention_layers() const {
  int n = 0;
  for (int l = 0; l < num_hidden_layers; ++l) n += layer_type(l) == LayerType::full_attention;
  return n;
}

ModelConfig parse_model_config(const json& j, const std::string& source,
                               std::vector<std::string>& ignored, std::vector<std::string>& notes) {
  GDN_CHECK(j.is_object(), "the model config in ", source, " is ", j.type_name(),
            ": expected an object with Hugging Face config keys");
  const TypeInfo type = type_info(j, source);
  if (!type.multimodal) {
    ModelConfig m =
        parse_text_config(j, JsonSection(j, "model", source), type.family, ignored, notes);
    return m;
  }
  // Qwen3.5's multimodal config: the text model under text_config, the vision tower
  // (not built) under vision_config; tie_word_embeddings is read at the top, as
  // transformers' Qwen3_5ForConditionalGeneration does.
  GDN_CHECK(j.contains("text_config") && j.at("text_config").is_object(), "model_type ",
            j.at("model_type").dump(), " in ", source,
            " holds its text model under \"text_config\", which is missing or not an object");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (key != "text_config" && key != "model_type" && key != "tie_word_embeddings")
      ignored.push_back(key);
  }
  json text = j.at("text_config");
  text["model_type"] = type.family == ModelFamily::qwen3_5 ? "qwen3_5_text" : "qwen3_5_moe_text";
  text.erase("tie_word_embeddings");
  if (j.contains("tie_word_embeddings")) text["tie_word_embeddings"] = j.at("tie_word_embeddings");
  std::vector<std::string> text_ignored;
  ModelConfig m = parse_text_config(text, JsonSection(text, "text_config", source), type.family,
                                    text_ignored, notes);
  for (const auto& k : text_ignored) ignored.push_back("text_config." + k);
  m.multimodal = true;
  return m;
}

ModelConfig parse_model_config(const json& j, const std::string& source) {
  std::vector<std::string> ignored, notes;
  return parse_model_config(j, source, ignored, notes);
}

std::string describe(const ModelConfig& m) {
  const int attention = m.num_attention_layers(), moe = m.num_moe_layers();
  std::string s = std::string(name_of(m.family)) + ": " + std::to_string(m.num_hidden_layers) +
                  " layers (" + std::to_string(m.num_hidden_layers - attention) + " GDN, " +
                  std::to_string(attention) + " attention), ";
  s += moe == 0 ? std::string("dense MLPs")
                : "MoE in " + std::to_string(moe) + " (" + std::to_string(m.num_experts) +
                      " experts, top " + std::to_string(m.num_experts_per_tok) + ")";
  return s + ", hidden " + std::to_string(m.hidden_size) + ", vocab " +
         std::to_string(m.vocab_size);
}

json to_json(const ModelConfig& m) {
  static const char* const kTextType[] = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"};
  static const char* const kArch[] = {"Qwen3NextForCausalLM", "Qwen3_5ForCausalLM",
                                      "Qwen3_5MoeForCausalLM"};
  const int f = int(m.family);
  json j{{"architectures", json::array({kArch[f]})},
         {"model_type", kTextType[f]},
         {"vocab_size", m.vocab_size},
         {"hidden_size", m.hidden_size},
         {"num_hidden_layers", m.num_hidden_layers},
         {"num_attention_heads", m.num_attention_heads},
         {"num_key_value_heads", m.num_key_value_heads},
         {"head_dim", m.head_dim},
         {"hidden_act", "silu"},
         {"attention_bias", m.attention_bias},
         {"attention_dropout", 0.0},
         {"rope_parameters",
          {{"rope_type", "default"},
           {"rope_theta", m.rope_theta},
           {"partial_rotary_factor", m.partial_rotary_factor}}},
         {"linear_num_key_heads", m.linear_num_key_heads},
         {"linear_num_value_heads", m.linear_num_value_heads},
         {"linear_key_head_dim", m.linear_key_head_dim},
         {"linear_value_head_dim", m.linear_value_head_dim},
         {"linear_conv_kernel_dim", m.linear_conv_kernel_dim},
         {"rms_norm_eps", m.rms_norm_eps},
         {"tie_word_embeddings", m.tie_word_embeddings},
         {"initializer_range", m.initializer_range},
         {"pad_token_id", m.pad_token_id < 0 ? json() : json(m.pad_token_id)},
         {"eos_token_id", m.eos_token_id < 0 ? json() : json(m.eos_token_id)}};
  json types = json::array();
  for (int l = 0; l < m.num_hidden_layers; ++l) types.push_back(name_of(m.layer_type(l)));
  j["layer_types"] = types;
  if (m.family != ModelFamily::qwen3_5_moe) j["intermediate_size"] = m.intermediate_size;
  if (m.family != ModelFamily::qwen3_5) {
    j["num_experts"] = m.num_experts;
    j["num_experts_per_tok"] = m.num_experts_per_tok;
    j["moe_intermediate_size"] = m.moe_intermediate_size;
    j["shared_expert_intermediate_size"] = m.shared_expert_intermediate_size;
    j["router_aux_loss_coef"] = m.router_aux_loss_coef;
    j["output_router_logits"] = m.output_router_logits;
  }
  if (m.family == ModelFamily::qwen3_next) {
    j["norm_topk_prob"] = m.norm_topk_prob;
    j["decoder_sparse_step"] = m.decoder_sparse_step;
    j["mlp_only_layers"] = m.mlp_only_layers;
  }
  return j;
}

std::vector<std::string> architecture_differences(const ModelConfig& a, const ModelConfig& b) {
  // Compared through to_json, so every key to_json writes is covered.
  json ja = to_json(a), jb = to_json(b);
  std::vector<std::string> out;
  std::set<std::string> keys;
  for (const auto& [key, v] : ja.items()) keys.insert(key);
  for (const auto& [key, v] : jb.items()) keys.insert(key);
  for (const std::string& key : keys) {
    if (key == "initializer_range" || key == "architectures" || key == "eos_token_id") continue;
    const json va = ja.contains(key) ? ja.at(key) : json(),
               vb = jb.contains(key) ? jb.at(key) : json();
    if (va == vb) continue;
    if (key == "layer_types" && va.size() == vb.size() && va.size() > 8)
      out.push_back("layer_types differ");
    else
      out.push_back(key + ": " + va.dump() + " vs " + vb.dump());
  }
  return out;
}

}  // namespace gdn
