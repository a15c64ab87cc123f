// Tests src/train/run_config (and train_config, its "train" object and flags): parsing,
// the messages naming file, key or flag, to_json round trips, and the layout checks.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/json_reader.h"
#include "test_support.h"
#include "train/run_config.h"
#include "train/run_identity.h"
#include "train/train_config.h"

using namespace gdn;
using Catch::Contains;
using Catch::EndsWith;
using Catch::StartsWith;
using nlohmann::json;

namespace {

json valid_config() {
  return json::parse(R"({
    "model": {"model_type": "qwen3_next", "num_experts": 0,
              "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2,
              "intermediate_size": 128, "linear_num_key_heads": 2,
              "linear_num_value_heads": 4, "linear_key_head_dim": 16,
              "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
              "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
              "initializer_range": 0.02},
    "train": {"seq_len": 100, "batch_size": 4, "steps": 6, "lr": 0.003,
              "warmup_steps": 2, "weight_decay": 0.1, "grad_clip": 1.0, "seed": 42,
              "dtype": "f64", "cp": 2, "dp": 2, "chunk_size": 16,
              "context_parallel_load_balance": false, "data": "synthetic",
              "log": "run.jsonl", "checkpoint_dir": "ckpt", "checkpoint_every": 3,
              "keep_checkpoints": 2, "watchdog_s": 30}
  })");
}

RunConfig parse(const json& j) {
  return parse_config(j, "test.json");
}

// data/ lies next to tests/ at the repository root.

}  // namespace

TEST_CASE("a full config parses and round-trips through to_json", "[config]") {
  const RunConfig c = parse(valid_config());
  CHECK(c.model.vocab_size == 256);
  CHECK(c.model.linear_num_value_heads == 4);
  CHECK(c.model.tie_word_embeddings);
  CHECK(c.model.rms_norm_eps == 1e-6);
  CHECK(c.train.seq_len == 100);
  CHECK(c.train.dtype == DType::f64);
  CHECK(c.train.seed == 42);
  CHECK(c.train.checkpoint_every == 3);
  CHECK(c.ignored_model_keys.empty());
  CHECK(c.source == "test.json");
  CHECK(to_json(parse(to_json(c))) == to_json(c));
  // to_json writes every key explicitly, and the file's values come back.
  const json out = to_json(c);
  for (const auto& [key, value] : valid_config()["model"].items())
    CHECK(out["model"][key] == value);
  for (const auto& [key, value] : valid_config()["train"].items())
    CHECK(out["train"][key] == value);
  CHECK_NOTHROW(validate_layout(c, 4));
}

TEST_CASE("a Hugging Face config.json works as \"model\"; keys without effect are listed",
          "[config]") {
  json j = valid_config();
  j["model"]["num_attention_heads"] = 16;
  j["model"]["use_cache"] = true;
  j["model"]["transformers_version"] = "5.24.0";
  j["model"]["layer_types"] = {"linear_attention", "full_attention"};
  const RunConfig c = parse(j);
  std::vector<std::string> ignored = c.ignored_model_keys;
  std::sort(ignored.begin(), ignored.end());
  CHECK(ignored == std::vector<std::string>{"transformers_version", "use_cache"});
  CHECK(c.model.num_attention_heads == 16);
  CHECK(c.model.layer_type(1) == LayerType::full_attention);
  CHECK(to_json(c.model)["layer_types"] == j["model"]["layer_types"]);
}

TEST_CASE("layer types are read from layer_types or full_attention_interval", "[config]") {
  json j = valid_config();
  j["model"]["layer_types"] = {"linear_attention"};
  CHECK_THROWS_WITH(parse(j), Contains("a list of 2 layer types"));
  j["model"]["layer_types"] = {"linear_attention", "mamba"};
  CHECK_THROWS_WITH(parse(j),
                    Contains("model.layer_types in test.json (layer 1)") && Contains("\"mamba\""));
  j = valid_config();
  j["model"]["full_attention_interval"] = 2;  // transformers: layer 1 is full attention
  CHECK(parse(j).model.layer_type(1) == LayerType::full_attention);
  CHECK(parse(j).model.layer_type(0) == LayerType::linear_attention);
  j["model"]["num_hidden_layers"] = 8;  // the default interval is 4
  j["model"].erase("full_attention_interval");
  CHECK(parse(j).model.num_attention_layers() == 2);
  CHECK(parse(j).model.layer_type(3) == LayerType::full_attention);
}

TEST_CASE("architecture_differences names each key with both values", "[config]") {
  const ModelConfig a = parse(valid_config()).model;
  ModelConfig b = a;
  CHECK(architecture_differences(a, b).empty());
  b.initializer_range = 0.5;  // shapes the initial weights only
  CHECK(architecture_differences(a, b).empty());
  b.linear_num_key_heads = 4;
  b.linear_key_head_dim = 8;  // the same parameter shapes as Hk 2 x K 16
  b.rms_norm_eps = 1e-5;
  const std::vector<std::string> d = architecture_differences(a, b);
  REQUIRE(d.size() == 3);
  CHECK_THAT(d[0] + d[1] + d[2], Contains("linear_key_head_dim: 16 vs 8") &&
                                     Contains("linear_num_key_heads: 2 vs 4") &&
                                     Contains("rms_norm_eps"));
}

TEST_CASE("absent model keys take transformers' defaults for the model type", "[config]") {
  json j = valid_config();
  for (const char* k : {"linear_conv_kernel_dim", "rms_norm_eps", "tie_word_embeddings",
                        "initializer_range", "num_experts"})
    j["model"].erase(k);
  j["train"] = {{"seq_len", 8}};
  const RunConfig c = parse(j);
  CHECK(c.model.linear_conv_kernel_dim == 4);
  CHECK(c.model.initializer_range == 0.02);
  CHECK_FALSE(c.model.tie_word_embeddings);
  CHECK(c.model.num_experts == 512);  // Qwen3NextConfig's default
  CHECK(c.model.num_experts_per_tok == 10);
  CHECK(c.model.head_dim == 256);
  CHECK(c.model.rotary_dim() == 64);  // partial_rotary_factor 0.25
  CHECK(c.train.dtype == DType::f32);
  CHECK(c.train.data == "synthetic");
}

TEST_CASE("an unknown train key is an error naming it, with a suggestion", "[config]") {
  json j = valid_config();
  j["train"]["stpes"] = 10;
  CHECK_THROWS_WITH(parse(j), Contains("unknown train key 'stpes' in test.json") &&
                                  Contains("did you mean 'steps'") && Contains("known: seq_len"));
  j = valid_config();
  j["train"]["zzzzzzzzzzzzzzzzzzzz"] = 1;
  CHECK_THROWS_WITH(parse(j), Contains("'zzzzzzzzzzzzzzzzzzzz'") && !Contains("did you mean"));
}

TEST_CASE("a missing model_type or train object is an error naming it", "[config]") {
  json j = valid_config();
  j["model"].erase("model_type");
  CHECK_THROWS_WITH(parse(j), Contains("model_type is missing in test.json") &&
                                  Contains("qwen3_next") && Contains("defaults"));
  j = valid_config();
  j.erase("train");
  CHECK_THROWS_WITH(parse(j), Contains("no \"train\""));
}

TEST_CASE("wrong types and ranges are errors naming key and value", "[config]") {
  auto with = [](const char* section, const char* key, json value) {
    json j = valid_config();
    j[section][key] = std::move(value);
    return j;
  };
  CHECK_THROWS_WITH(parse(with("model", "hidden_size", "2048")),
                    Contains("model.hidden_size = \"2048\" in test.json") &&
                        Contains("expected an integer >= 1"));
  CHECK_THROWS_WITH(parse(with("model", "vocab_size", -5)), Contains("model.vocab_size = -5"));
  CHECK_THROWS_WITH(parse(with("model", "num_hidden_layers", 2.5)),
                    Contains("model.num_hidden_layers = 2.5"));
  CHECK_THROWS_WITH(parse(with("model", "rms_norm_eps", 0)), Contains("model.rms_norm_eps = 0"));
  CHECK_THROWS_WITH(parse(with("model", "tie_word_embeddings", "yes")),
                    Contains("tie_word_embeddings") && Contains("true or false"));
  CHECK_THROWS_WITH(parse(with("train", "dtype", "f16")),
                    Contains("train.dtype = \"f16\"") && Contains("\"f64\" or \"bf16\""));
  CHECK_THROWS_WITH(parse(with("train", "seed", -1)), Contains("train.seed = -1"));
  CHECK_THROWS_WITH(parse(with("train", "cp", 0)), Contains("train.cp = 0"));
  CHECK_THROWS_WITH(parse(with("train", "lr", "fast")), Contains("train.lr = \"fast\""));
  CHECK_THROWS_WITH(parse(with("train", "context_parallel_load_balance", 1)),
                    Contains("context_parallel_load_balance = 1") && Contains("true or false"));
  CHECK_THROWS_WITH(parse(with("train", "data", 3)), Contains("train.data = 3"));
  CHECK_THROWS_WITH(parse(with("train", "keep_checkpoints", -1)),
                    Contains("train.keep_checkpoints = -1") && Contains("an integer >= 0"));
  CHECK_THROWS_WITH(parse(with("train", "watchdog_s", -1)), Contains("train.watchdog_s = -1"));
  CHECK_THROWS_WITH(parse(json::array()), Contains("test.json"));
  // A whole number written as a real is that integer; a fraction is not.
  CHECK(parse(with("train", "batch_size", 2.0)).train.batch_size == 2);
  CHECK(parse(with("model", "hidden_size", 64.0)).model.hidden_size == 64);
  CHECK_THROWS_WITH(parse(with("train", "batch_size", 2.5)),
                    Contains("train.batch_size = 2.5") && Contains("an integer >= 1"));
}

TEST_CASE("a flag gets exactly its key's checks, and the message names the flag", "[config]") {
  RunConfig c = parse(valid_config());
  const TrainField* batch = find_train_field("batch_size");
  REQUIRE(batch);
  CHECK(std::string(batch->flag) == "batch");
  for (const char* bad : {"0", "-2", "abc", "", "2.5", "99999999999999999999"})
    CHECK_THROWS_WITH(set_train_field_text(c.train, *batch, bad),
                      Contains(std::string("--batch ") + (*bad ? bad : "''")) &&
                          Contains("expected an integer >= 1"));
  set_train_field_text(c.train, *batch, "8");
  CHECK(c.train.batch_size == 8);
  CHECK(c.train.origin("batch_size") == " (--batch)");
  CHECK(c.train.origin("seq_len") == " (train.seq_len in test.json)");
  CHECK_THROWS_WITH(set_train_field_text(c.train, *find_train_field("lr"), "1e400"),
                    Contains("--lr 1e400"));
  // Decimal only: hex, inf and nan are refused; a whole number in decimal form is that
  // integer; a magnitude below the smallest double reads as 0, for the range to judge.
  for (const char* bad : {"0x10", "inf", "nan", "1e", "1.2.3", " 1"})
    CHECK_THROWS_WITH(set_train_field_text(c.train, *find_train_field("lr"), bad),
                      Contains(std::string("--lr ") + bad) && Contains("expected a number >= 0"));
  set_train_field_text(c.train, *find_train_field("lr"), "3e-4");
  CHECK(c.train.lr == 3e-4);
  set_train_field_text(c.train, *find_train_field("lr"), "1e-400");
  CHECK(c.train.lr == 0);
  set_train_field_text(c.train, *find_train_field("weight_decay"), "1e-400");
  CHECK(c.train.weight_decay == 0);
  set_train_field_text(c.train, *batch, "1.0");
  CHECK(c.train.batch_size == 1);
  set_train_field_text(c.train, *batch, "1e1");
  CHECK(c.train.batch_size == 10);
  CHECK(parse_decimal("0x10") == std::nullopt);
  CHECK(parse_decimal("-2.5e1") == -25.0);
  CHECK(parse_decimal("1e400") == std::nullopt);
  CHECK_THROWS_WITH(set_train_field_text(c.train, *find_train_field("dtype"), "f16"),
                    Contains("--dtype f16") && Contains("\"f64\" or \"bf16\""));
  // Every key has a flag except MaxText's zigzag switch (--load-balance covers it), and
  // every field round-trips through to_json.
  for (const TrainField& f : train_fields())
    CHECK((*f.flag != 0) == (std::string(f.key) != "context_parallel_load_balance"));
  CHECK(to_json(c.train).size() == train_fields().size());
}

TEST_CASE("layout messages name where each value came from", "[config]") {
  RunConfig c = parse(valid_config());
  c.train.cp = 4;
  c.train.dp = 1;
  set_train_field_text(c.train, *find_train_field("seq_len"), "3");
  CHECK_THROWS_WITH(validate_layout(c, 4),
                    Contains("seq_len 3 (--seq-len) is below cp 4 (train.cp in test.json)"));
}

TEST_CASE("a number that overflows a double names the file and the key", "[config]") {
  const test::TempDir tmp("gdn_test_run_config");
  const std::string path = tmp / "overflow.json";
  std::string text = valid_config().dump();
  text.replace(text.find("\"seq_len\":100"), 13, "\"seq_len\":1e400");
  std::ofstream(path) << text;
  CHECK_THROWS_WITH(load_config(path),
                    Contains(path) && Contains("'train.seq_len'") && Contains("out of range"));
}

TEST_CASE("load_config names the file when it is missing or malformed", "[config]") {
  const test::TempDir tmp("gdn_test_run_config");
  CHECK_THROWS_WITH(load_config(tmp / "nope.json"), Contains(tmp / "nope.json"));
  const std::string bad = tmp / "bad.json";
  std::ofstream(bad) << R"({"model": {"vocab_size": 256,})";
  CHECK_THROWS_WITH(load_config(bad), Contains(bad) && Contains("not valid JSON"));
  const std::string good = tmp / "good.json";
  std::ofstream(good) << valid_config().dump(2);
  const RunConfig c = load_config(good);
  CHECK(c.source == good);
  CHECK(c.train.cp == 2);
}

TEST_CASE("validate_layout refuses step sizes that overflow 64 bits, naming the flag or key",
          "[config]") {
  // vocab_size 256 is the widest row: 2^62 tokens x 256 x 8 bytes wraps around.
  RunConfig c = parse(valid_config());
  set_train_field_text(c.train, *find_train_field("seq_len"), "4611686018427387904");
  CHECK_THROWS_WITH(validate_layout(c, 4),
                    StartsWith("--seq-len 4611686018427387904: batch_size x seq_len x 256 values "
                               "(vocab_size) x 8 bytes overflows a 64-bit size even at "
                               "batch_size 1") &&
                        EndsWith("the largest seq_len whose sizes fit is 4503599627370495"));
  c = parse(valid_config());
  c.train.seq_len = std::int64_t(1) << 62;  // as if from the file
  CHECK_THROWS_WITH(validate_layout(c, 4),
                    StartsWith("train.seq_len = 4611686018427387904 in test.json: "));
  // 2^50 tokens x 2^11 bytes fit for one sequence, not for the 4 of the batch: the batch
  // is named.
  c = parse(valid_config());
  c.train.seq_len = std::int64_t(1) << 50;
  CHECK_THROWS_WITH(validate_layout(c, 4),
                    StartsWith("train.batch_size = 4 in test.json: ") &&
                        EndsWith("the largest batch_size whose sizes fit is 3"));
  c.train.seq_len = (std::int64_t(1) << 50) - 1;
  CHECK_NOTHROW(validate_layout(c, 4));
}

TEST_CASE("validate_layout explains each bad layout", "[config]") {
  const RunConfig base = parse(valid_config());  // dp = 2, cp = 2
  CHECK_THROWS_WITH(validate_layout(base, 3), Contains("world size 3") && Contains("mpirun -np 4"));
  RunConfig c = base;
  c.train.batch_size = 3;
  CHECK_THROWS_WITH(validate_layout(c, 4), Contains("batch_size 3") && Contains("dp 2"));
  c = base;
  c.train.cp = 4;
  c.train.dp = 1;
  c.train.seq_len = 3;
  CHECK_THROWS_WITH(validate_layout(c, 4),
                    Contains("seq_len 3 (train.seq_len in test.json) is below cp 4") &&
                        Contains("every context-parallel rank needs at least one token"));
  c = base;
  c.model.linear_num_key_heads = 3;
  CHECK_THROWS_WITH(validate_layout(c, 4),
                    Contains("linear_num_value_heads (Hv = 4)") && Contains("(Hk = 3)"));
  for (int bad : {8, 48, 256}) {
    c = base;
    c.train.chunk_size = bad;
    CHECK_THROWS_WITH(validate_layout(c, 4), Contains("chunk_size " + std::to_string(bad)) &&
                                                 Contains("power of two in [16, 128]"));
  }
  for (int good : {16, 32, 64, 128}) {
    c = base;
    c.train.chunk_size = good;
    CHECK_NOTHROW(validate_layout(c, 4));
  }
  c = base;
  c.train.context_parallel_load_balance = true;
  CHECK_THROWS_WITH(validate_layout(c, 4),
                    Contains("requires contiguous, in-order shards") &&
                        Contains("train.context_parallel_load_balance in test.json"));
}

// The schedule on --resume (train/run_identity.h): the lr of every step a checkpoint took,
// under its schedule keys and this run's. The identity itself is held equal here.
TEST_CASE("a resume that would change the lr of a step taken is refused as 'schedule'",
          "[config]") {
  json j = valid_config();
  j["train"]["steps"] = 100;
  j["train"]["warmup_steps"] = 10;
  const RunConfig cfg = parse(j);
  const json identity = {{"seed", 42}};
  json saved = to_json(cfg);
  saved["run"] = identity;
  CHECK(compare_run_identity(saved, cfg, identity, 50, {}).refused.empty());

  // A longer cosine run moves the lr of every step after warmup: the first is step 11.
  RunConfig longer = cfg;
  longer.train.steps = 200;
  const IdentityDifferences d = compare_run_identity(saved, longer, identity, 50, {});
  REQUIRE(d.refused.size() == 1);
  CHECK(d.refused_keys == std::vector<std::string>{"schedule"});
  CHECK_THAT(d.refused[0], Contains("the lr of step 11,") && Contains("train.steps 100 vs 200"));
  // Taken as asked; and with only the warmup taken, nothing changes.
  CHECK(compare_run_identity(saved, longer, identity, 50, {"schedule"}).accepted.size() == 1);
  CHECK(compare_run_identity(saved, longer, identity, 11, {}).refused.empty());

  // A longer wsd run keeps every step before its decay (from step 82 of 100 here).
  json wsd = j;
  wsd["train"]["lr_schedule"] = "wsd";
  const RunConfig w = parse(wsd);
  json saved_w = to_json(w);
  saved_w["run"] = identity;
  RunConfig w_longer = w;
  w_longer.train.steps = 300;
  CHECK(compare_run_identity(saved_w, w_longer, identity, 82, {}).refused.empty());
  CHECK_THAT(compare_run_identity(saved_w, w_longer, identity, 90, {}).refused.at(0),
             Contains("the lr of step 83,"));
  // Another floor or schedule is named by its key.
  RunConfig floor = w;
  floor.train.min_lr = 0;
  CHECK_THAT(compare_run_identity(saved_w, floor, identity, 90, {}).refused.at(0),
             Contains("train.min_lr -1"));

  // A checkpoint from before the schedule keys existed ran today's default: cosine to lr / 10.
  json old = saved;
  for (const char* k : {"lr_schedule", "min_lr", "decay_fraction"}) old["train"].erase(k);
  CHECK(compare_run_identity(old, cfg, identity, 100, {}).refused.empty());
  CHECK(parse_accepted_changes("seed,schedule") == std::vector<std::string>{"seed", "schedule"});
}

TEST_CASE("the schedule's keys: bad values name the key and what is expected", "[config]") {
  json j = valid_config();
  j["train"]["lr_schedule"] = "step";
  CHECK_THROWS_WITH(parse(j), Contains("train.lr_schedule") && Contains("\"wsd\""));
  j = valid_config();
  j["train"]["decay_fraction"] = 0;
  CHECK_THROWS_WITH(parse(j), Contains("train.decay_fraction"));
  j = valid_config();
  j["train"]["min_lr"] = 0.01;  // above lr 0.003
  CHECK_THROWS_WITH(validate_layout(parse(j), 4),
                    Contains("min_lr 0.01") && Contains("is above lr 0.003"));
}
