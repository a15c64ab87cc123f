// Hugging Face config intake (model/model_config.h): each family's defaults, the Qwen3.5
// text_config wrapper, every architectural key honoured with its value or refused with a
// message naming it, and to_json read back to the same model.
#include <catch2/catch.hpp>

#include "core/json_reader.h"
#include "model/model_config.h"

using namespace gdn;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

ModelConfig parse(const json& j) {
  return parse_model_config(j, "config.json");
}

json next_config() {
  return json::parse(R"({"model_type": "qwen3_next", "vocab_size": 64, "hidden_size": 32,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
    "linear_value_head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 12, "shared_expert_intermediate_size": 20, "intermediate_size": 24})");
}

// j with key set to value (a JSON pointer path such as "/rope_parameters/rope_type").
json with(json j, const std::string& path, json value) {
  j[json::json_pointer(path)] = std::move(value);
  return j;
}

}  // namespace

TEST_CASE("the committed fixtures' config.json files read as transformers built them",
          "[hf_config]") {
  const std::string fixtures = GDN_SOURCE_DIR "/tests/fixtures/hf/";
  const ModelConfig next = parse(read_json_file(fixtures + "qwen3_next_moe/config.json"));
  CHECK(next.family == ModelFamily::qwen3_next);
  CHECK_FALSE(next.norm_topk_prob);
  CHECK(next.mlp_only_layers == std::vector<int>{2});
  CHECK(next.is_moe_layer(1));
  CHECK_FALSE(next.is_moe_layer(2));
  CHECK(next.output_router_logits);
  CHECK(next.router_aux_loss_coef == 0.25);
  CHECK(next.layer_type(1) == LayerType::full_attention);
  CHECK(next.rotary_dim() == 4);
  std::vector<std::string> ignored, notes;
  const ModelConfig dense = parse_model_config(
      read_json_file(fixtures + "qwen3_5_dense/config.json"), "c", ignored, notes);
  CHECK(dense.family == ModelFamily::qwen3_5);
  CHECK(dense.multimodal);
  CHECK(dense.tie_word_embeddings);  // the wrapper's own key, as transformers reads it
  CHECK(dense.rope_theta == 1e6);
  CHECK(dense.rotary_dim() == 8);
  CHECK(dense.num_moe_layers() == 0);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Contains("mRoPE") && Contains("plain RoPE"));
  CHECK(std::find(ignored.begin(), ignored.end(), "vision_config") != ignored.end());
  const ModelConfig moe = parse(read_json_file(fixtures + "qwen3_5_moe/config.json"));
  CHECK(moe.family == ModelFamily::qwen3_5_moe);
  CHECK(moe.num_moe_layers() == 4);
  // to_json is read back to the same model, for each family.
  for (const ModelConfig* m : {&next, &dense, &moe}) {
    CHECK(architecture_differences(parse(to_json(*m)), *m).empty());
    CHECK(to_json(parse(to_json(*m))) == to_json(*m));
  }
}

TEST_CASE("absent keys take each family's transformers defaults", "[hf_config]") {
  const ModelConfig next = parse(json{{"model_type", "qwen3_next"}});
  CHECK(next.vocab_size == 151936);
  CHECK(next.num_hidden_layers == 48);
  CHECK(next.num_experts == 512);
  CHECK(next.num_experts_per_tok == 10);
  CHECK(next.num_attention_layers() == 12);  // full_attention_interval 4
  CHECK(next.rope_theta == 10000.0);
  const ModelConfig q35 = parse(json{{"model_type", "qwen3_5_text"}});
  CHECK(q35.vocab_size == 248320);
  CHECK(q35.hidden_size == 4096);
  CHECK(q35.num_key_value_heads == 4);
  CHECK(q35.num_experts == 0);
  const ModelConfig moe =
      parse(json{{"model_type", "qwen3_5_moe"}, {"text_config", json::object()}});
  CHECK(moe.num_experts == 256);
  CHECK(moe.num_experts_per_tok == 8);
  CHECK(moe.num_hidden_layers == 40);
  CHECK(moe.multimodal);
}

TEST_CASE("rope keys: rope_parameters over the legacy top-level keys, as transformers",
          "[hf_config]") {
  json j = next_config();
  j["rope_theta"] = 5e5;
  j["partial_rotary_factor"] = 0.5;
  CHECK(parse(j).rope_theta == 5e5);
  CHECK(parse(j).rotary_dim() == 8);
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 1e6}, {"partial_rotary_factor", 0.25}};
  CHECK(parse(j).rope_theta == 1e6);
  CHECK(parse(j).rotary_dim() == 4);
}

TEST_CASE("every architectural key gdn-cp cannot build is refused, naming it", "[hf_config]") {
  const json n = next_config();
  json dense = with(n, "/model_type", "qwen3_5_text");
  for (const char* k : {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                        "shared_expert_intermediate_size"})
    dense.erase(k);
  CHECK_NOTHROW(parse(dense));
  struct Case {
    json config;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {with(n, "/hidden_act", "gelu"), {"hidden_act", "\"silu\""}},
      {with(n, "/layer_types",
            {"linear_attention", "sliding_attention", "linear_attention", "full_attention"}),
       {"layer_types", "(layer 1)", "sliding_attention"}},
      {with(n, "/rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}}),
       {"rope_type", "yarn"}},
      {with(n, "/rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}),
       {"rope_scaling", "linear"}},
      {with(n, "/rope_parameters", {{"rope_type", "default"}, {"factor", 2.0}}), {"'factor'"}},
      {with(n, "/rope_parameters", {{"rope_theta", -1}}), {"rope_theta"}},
      {with(n, "/partial_rotary_factor", 1.5), {"partial_rotary_factor", "(0, 1]"}},
      {with(n, "/partial_rotary_factor", 0.35), {"odd rotary dimension", "= 5"}},
      {with(n, "/attention_dropout", 0.1), {"attention_dropout"}},
      {with(n, "/attn_output_gate", false), {"attn_output_gate"}},
      {with(n, "/num_key_value_heads", 3),
       {"num_attention_heads", "multiple of num_key_value_heads"}},
      {with(n, "/num_experts_per_tok", 5), {"num_experts_per_tok", "at most num_experts"}},
      {with(n, "/decoder_sparse_step", 0), {"decoder_sparse_step"}},
      {with(n, "/mlp_only_layers", {4}), {"mlp_only_layers", "[0, 4)"}},
      {with(n, "/mlp_only_layers", {1, 1}), {"mlp_only_layers", "distinct"}},
      {with(n, "/pad_token_id", 64), {"pad_token_id"}},
      {with(n, "/sliding_window", 4096), {"sliding_window", "not built"}},
      {with(n, "/use_sliding_window", true), {"use_sliding_window"}},
      {with(n, "/quantization_config", {{"quant_method", "fp8"}}), {"quantization_config"}},
      {with(n, "/model_type", "llama"), {"model_type", "\"llama\""}},
      {with(dense, "/num_experts", 4), {"num_experts", "dense"}},
      {with(dense, "/output_router_logits", true), {"output_router_logits", "qwen3_5_moe"}},
      {with(dense, "/mlp_only_layers", json::array()), {"mlp_only_layers", "dense"}},
      {with(with(n, "/model_type", "qwen3_5_moe_text"), "/norm_topk_prob", false),
       {"norm_topk_prob", "always renormalises"}},
      {with(with(n, "/model_type", "qwen3_5_moe_text"), "/decoder_sparse_step", 2),
       {"decoder_sparse_step", "every layer"}},
      {with(with(n, "/model_type", "qwen3_5_moe_text"), "/mlp_only_layers", {1}),
       {"mlp_only_layers", "every layer"}},
      {with(with(n, "/model_type", "qwen3_5_moe_text"), "/num_experts", 0), {"num_experts"}},
      {json{{"model_type", "qwen3_5"}}, {"text_config", "missing"}},
  };
  const Case c = GENERATE_REF(from_range(cases));
  std::string says;  // names the section: the phrases the message must hold
  for (const std::string& s : c.says) says += (says.empty() ? "" : " / ") + s;
  DYNAMIC_SECTION(says) {
    INFO(c.config.dump());
    std::string message;
    try {
      parse(c.config);
    } catch (const std::exception& e) {
      message = e.what();
    }
    REQUIRE_FALSE(message.empty());
    for (const std::string& s : c.says) CHECK_THAT(message, Contains(s));
  }
  // The neutral value of a foreign key asks for nothing, so it is accepted.
  CHECK_NOTHROW(parse(with(with(n, "/sliding_window", nullptr), "/use_sliding_window", false)));
  CHECK_NOTHROW(parse(with(n, "/attn_output_gate", true)));
}

TEST_CASE("keys with no effect on the math are listed, not refused", "[hf_config]") {
  json j = next_config();
  for (const char* k : {"bos_token_id", "eos_token_id", "torch_dtype", "use_cache",
                        "max_position_embeddings", "transformers_version", "architectures"})
    j[k] = 1;
  std::vector<std::string> ignored, notes;
  const ModelConfig m = parse_model_config(j, "config.json", ignored, notes);
  std::sort(ignored.begin(), ignored.end());
  // eos_token_id is read: train.documents eos ends documents there.
  CHECK(ignored == std::vector<std::string>{"architectures", "bos_token_id",
                                            "max_position_embeddings", "torch_dtype",
                                            "transformers_version", "use_cache"});
  CHECK(m.eos_token_id == 1);
}

TEST_CASE("eos_token_id: one id, a list (the first), null or out of range", "[hf_config]") {
  json j = next_config();
  std::vector<std::string> ignored, notes;
  j["eos_token_id"] = json::array({7, 3});
  CHECK(parse_model_config(j, "config.json", ignored, notes).eos_token_id == 7);
  CHECK_THAT(notes.back(), Contains("lists 2 ids: documents end at the first, 7"));
  j["eos_token_id"] = nullptr;
  CHECK(parse_model_config(j, "config.json", ignored, notes).eos_token_id == -1);
  j["eos_token_id"] = j["vocab_size"];
  CHECK_THROWS_WITH(parse_model_config(j, "config.json", ignored, notes), Contains("eos_token_id"));
  // It does not make another architecture: a checkpoint resumes across it.
  ModelConfig a = parse_model_config(next_config(), "config.json", ignored, notes), b = a;
  b.eos_token_id = 5;
  CHECK(architecture_differences(a, b).empty());
}
