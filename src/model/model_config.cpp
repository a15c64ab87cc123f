#include "model/model_config.h"

#include <algorithm>

#include "core/error.h"
#include "core/json_reader.h"

namespace gdn {

namespace {

using nlohmann::json;

const std::vector<std::string> kRequiredKeys = {
    "vocab_size",          "hidden_size",           "num_hidden_layers",
    "intermediate_size",   "linear_num_key_heads",  "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim",
};
const std::vector<std::string> kOptionalKeys = {
    "linear_conv_kernel_dim", "rms_norm_eps", "tie_word_embeddings",
    "initializer_range",      "layer_types",  "full_attention_interval"};

bool is_one_of(const std::string& key, const std::vector<std::string>& keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

[[noreturn]] void refuse_full_attention(const std::string& where) {
  throw_error(where,
              " asks for a full_attention layer: gdn-cp builds linear_attention (Gated "
              "DeltaNet) layers only so far; gated full attention is not implemented yet");
}

// layer_types (a list of names, one per layer) or full_attention_interval (Hugging Face's
// rule: layer i is full attention when (i + 1) % interval == 0).
std::vector<LayerType> parse_layer_types(const JsonSection& s, int layers) {
  std::vector<LayerType> out;
  if (s.has("layer_types")) {
    const json& v = s.at("layer_types");
    if (!v.is_array() || int(v.size()) != layers)
      s.fail("layer_types", "a list of " + std::to_string(layers) +
                                " layer types (one per layer, num_hidden_layers)");
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string where = s.where("layer_types") + " (layer " + std::to_string(i) + ")";
      GDN_CHECK(v[i].is_string(), where, " = ", v[i].dump(), ": expected \"linear_attention\"");
      const std::string t = v[i].get<std::string>();
      if (t == "full_attention") refuse_full_attention(where);
      GDN_CHECK(t == "linear_attention", where, " = \"", t,
                "\": expected \"linear_attention\" (or \"full_attention\", not built yet)");
      out.push_back(LayerType::linear_attention);
    }
  } else if (s.has("full_attention_interval")) {
    const int every = s.int32("full_attention_interval", 1);
    if (every <= layers) refuse_full_attention(s.where("full_attention_interval"));
  }
  return out;
}

}  // namespace

const char* layer_type_name(LayerType t) {
  switch (t) {
    case LayerType::linear_attention:
      return "linear_attention";
  }
  return "?";
}

ModelConfig parse_model_config(const json& j, const std::string& source,
                               std::vector<std::string>& ignored) {
  GDN_CHECK(j.is_object(), "\"model\" in ", source, " is ", j.type_name(),
            ": expected an object with the Hugging Face Qwen3NextConfig keys");
  for (const auto& key : kRequiredKeys)
    GDN_CHECK(j.contains(key), "model key '", key, "' is missing in ", source,
              " (required: ", join(kRequiredKeys), ")");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (!is_one_of(key, kRequiredKeys) && !is_one_of(key, kOptionalKeys)) ignored.push_back(key);
  }

  const JsonSection s(j, "model", source);
  ModelConfig m;
  m.vocab_size = s.int32("vocab_size", 1);
  m.hidden_size = s.int32("hidden_size", 1);
  m.num_hidden_layers = s.int32("num_hidden_layers", 1);
  m.intermediate_size = s.int32("intermediate_size", 1);
  m.linear_num_key_heads = s.int32("linear_num_key_heads", 1);
  m.linear_num_value_heads = s.int32("linear_num_value_heads", 1);
  m.linear_key_head_dim = s.int32("linear_key_head_dim", 1);
  m.linear_value_head_dim = s.int32("linear_value_head_dim", 1);
  if (s.has("linear_conv_kernel_dim"))
    m.linear_conv_kernel_dim = s.int32("linear_conv_kernel_dim", 1);
  if (s.has("rms_norm_eps")) m.rms_norm_eps = s.real("rms_norm_eps", 0.0, true);
  if (s.has("tie_word_embeddings")) m.tie_word_embeddings = s.boolean("tie_word_embeddings");
  if (s.has("initializer_range")) m.initializer_range = s.real("initializer_range", 0.0, false);
  m.layer_types = parse_layer_types(s, m.num_hidden_layers);
  return m;
}

json to_json(const ModelConfig& m) {
  json j{{"vocab_size", m.vocab_size},
         {"hidden_size", m.hidden_size},
         {"num_hidden_layers", m.num_hidden_layers},
         {"intermediate_size", m.intermediate_size},
         {"linear_num_key_heads", m.linear_num_key_heads},
         {"linear_num_value_heads", m.linear_num_value_heads},
         {"linear_key_head_dim", m.linear_key_head_dim},
         {"linear_value_head_dim", m.linear_value_head_dim},
         {"linear_conv_kernel_dim", m.linear_conv_kernel_dim},
         {"rms_norm_eps", m.rms_norm_eps},
         {"tie_word_embeddings", m.tie_word_embeddings},
         {"initializer_range", m.initializer_range}};
  if (!m.layer_types.empty()) {
    json types = json::array();
    for (LayerType t : m.layer_types) types.push_back(layer_type_name(t));
    j["layer_types"] = types;
  }
  return j;
}

std::vector<std::string> architecture_differences(const ModelConfig& a, const ModelConfig& b) {
  // Compared through to_json, so every key to_json writes is covered, layer types too.
  json ja = to_json(a), jb = to_json(b);
  ja.erase("initializer_range");
  jb.erase("initializer_range");
  std::vector<LayerType> la(a.num_hidden_layers), lb(b.num_hidden_layers);
  for (int l = 0; l < a.num_hidden_layers; ++l) la[l] = a.layer_type(l);
  for (int l = 0; l < b.num_hidden_layers; ++l) lb[l] = b.layer_type(l);
  ja.erase("layer_types");
  jb.erase("layer_types");
  std::vector<std::string> out;
  for (const auto& [key, va] : ja.items()) {
    const json vb = jb.contains(key) ? jb.at(key) : json();
    if (va != vb) out.push_back(key + ": " + va.dump() + " vs " + vb.dump());
  }
  if (la != lb && a.num_hidden_layers == b.num_hidden_layers) out.push_back("layer_types differ");
  return out;
}

}  // namespace gdn
