// Unit tests of the training pieces that need no MPI: config parsing and layout checks,
// learning-rate schedule, AdamW and clipping against hand-computed values, the token
// sources, and checkpoints (round trip, dtype conversion, torn and corrupt files).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "test_support.h"
#include "train/checkpoint.h"
#include "train/checkpoint_rotation.h"
#include "train/data.h"
#include "train/optimizer.h"
#include "train/run_config.h"
#include "train/step_log.h"
#include "train/train_config.h"

using namespace gdn;
using Catch::Contains;
using Catch::EndsWith;
using Catch::StartsWith;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("gdn_test_train") {}
};

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
std::string find_public_domain_text() {
  const fs::path rel = fs::path("data") / "public_domain.txt";
  const fs::path from_source = fs::path(__FILE__).parent_path().parent_path() / rel;
  if (fs::exists(from_source)) return from_source.string();
  // Else walk up from the working directory and from the binary (build dirs are inside
  // the repository).
  std::error_code ec;
  for (fs::path start : {fs::current_path(), fs::read_symlink("/proc/self/exe", ec)}) {
    for (fs::path d = start; !d.empty(); d = d.parent_path()) {
      if (fs::exists(d / rel)) return (d / rel).string();
      if (d == d.parent_path()) break;
    }
  }
  FAIL("cannot find data/public_domain.txt from " << __FILE__
                                                  << ", the current directory or the binary");
  return {};
}

}  // namespace

// ---------------------------------------------------------------- config

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
  CHECK_THROWS_WITH(parse(with("train", "dtype", "bf16")),
                    Contains("train.dtype = \"bf16\"") && Contains("\"f32\" or \"f64\""));
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
  CHECK_THROWS_WITH(set_train_field_text(c.train, *find_train_field("dtype"), "bf16"),
                    Contains("--dtype bf16") && Contains("\"f32\" or \"f64\""));
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
  TempDir tmp;
  const std::string path = tmp / "overflow.json";
  std::string text = valid_config().dump();
  text.replace(text.find("\"seq_len\":100"), 13, "\"seq_len\":1e400");
  std::ofstream(path) << text;
  CHECK_THROWS_WITH(load_config(path),
                    Contains(path) && Contains("'train.seq_len'") && Contains("out of range"));
}

TEST_CASE("load_config names the file when it is missing or malformed", "[config]") {
  TempDir tmp;
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

TEST_CASE("truncate_step_log keeps the steps before the checkpoint, once", "[train]") {
  TempDir tmp;
  const std::string log = tmp / "run.jsonl";
  CHECK(truncate_step_log(log, 2) == 0);  // no log yet
  std::ofstream(log) << "{\"step\":0,\"loss\":5}\n{\"step\":1,\"loss\":4}\n{\"step\":2}\n"
                        "{\"step\":3}\n{\"step\":4,\"lo";
  CHECK(truncate_step_log(log, 2) == 3);
  std::ifstream in(log);
  const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(kept == "{\"step\":0,\"loss\":5}\n{\"step\":1,\"loss\":4}\n");
  CHECK(truncate_step_log(log, 2) == 0);  // nothing more to drop
  CHECK_FALSE(fs::exists(log + ".tmp"));
  CHECK(truncate_step_log("/dev/null", 0) == 0);  // not a regular file: left alone
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

// ---------------------------------------------------------------- optimizer

TEST_CASE("learning_rate: linear warmup then cosine to min_lr_ratio * lr", "[optimizer]") {
  AdamWConfig c;
  c.lr = 1e-3;
  c.warmup_steps = 10;
  c.total_steps = 110;
  c.min_lr_ratio = 0.1;
  CHECK(learning_rate(c, 0) == Approx(1e-4).epsilon(1e-14));
  CHECK(learning_rate(c, 4) == Approx(5e-4).epsilon(1e-14));
  CHECK(learning_rate(c, 9) == Approx(1e-3).epsilon(1e-14));
  CHECK(learning_rate(c, 10) == Approx(1e-3).epsilon(1e-14));
  CHECK(learning_rate(c, 60) == Approx(1e-4 + 0.5 * 9e-4).epsilon(1e-14));  // half way
  CHECK(learning_rate(c, 110) == Approx(1e-4).epsilon(1e-14));
  CHECK(learning_rate(c, 500) == Approx(1e-4).epsilon(1e-14));
  c.warmup_steps = 0;
  CHECK(learning_rate(c, 0) == Approx(1e-3).epsilon(1e-14));
}

namespace {
// A store of parameters with the given host values and gradients.
ParamStore<double, Host> store(const std::vector<std::pair<Shape, bool>>& shapes) {
  ParamStore<double, Host> ps;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    ps.add(std::string("p").append(std::to_string(i)), shapes[i].first, shapes[i].second);
  ps.allocate();
  return ps;
}
void set(double* dst, const std::vector<double>& v) {
  std::copy(v.begin(), v.end(), dst);
}
}  // namespace

TEST_CASE("clip_grad_norm scales to max_norm and returns the norm before", "[optimizer]") {
  ParamStore<double, Host> ps = store({{{2}, true}, {{1}, false}});
  set(ps.grad(0), {3, 4});
  set(ps.grad(1), {12});
  CHECK(clip_grad_norm(ps, 0.0) == 13.0);  // 0: report only
  CHECK(ps.grad(0)[0] == 3);
  CHECK(clip_grad_norm(ps, 20.0) == 13.0);  // below the limit: unchanged
  CHECK(ps.grad(1)[0] == 12.0);
  CHECK(clip_grad_norm(ps, 6.5) == 13.0);
  CHECK(ps.grad(0)[0] == Approx(1.5));
  CHECK(ps.grad(0)[1] == Approx(2.0));
  CHECK(ps.grad(1)[0] == Approx(6.0));
  CHECK(clip_grad_norm(ps, 0.0) == Approx(6.5));
  ps.grad(1)[0] = std::nan("");
  CHECK(std::isnan(clip_grad_norm(ps, 1.0)));  // reported, nothing scaled
  CHECK(ps.grad(0)[0] == Approx(1.5));
}

TEST_CASE("AdamW: one step matches the hand-computed update", "[optimizer]") {
  AdamWConfig cfg;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.95;
  cfg.eps = 1e-8;
  const double lr = 0.1;
  for (const double wd : {0.0, 0.01}) {
    cfg.weight_decay = wd;
    // w and the last one decay; n (a norm) never does.
    ParamStore<double, Host> ps = store({{{2}, true}, {{2}, false}, {{1}, true}});
    double *w = ps.value(0), *n = ps.value(1);
    set(w, {1.0, -2.0});
    set(n, {1.0, -2.0});
    set(ps.grad(0), {0.5, -1.0});
    set(ps.grad(1), {0.5, -1.0});
    AdamW<double, Host> opt(cfg, ps);
    opt.step(ps, 0, lr);
    // Step 1: m = 0.1 g, v = 0.05 g^2, so m_hat = g and v_hat = g^2: the update is
    // g / (|g| + eps), plus the decoupled decay p * (1 - lr * wd) first.
    const double u0 = 0.5 / (0.5 + 1e-8), u1 = -1.0 / (1.0 + 1e-8);
    const double keep = 1.0 - lr * wd;
    CHECK(w[0] == Approx(1.0 * keep - lr * u0).epsilon(1e-14));
    CHECK(w[1] == Approx(-2.0 * keep - lr * u1).epsilon(1e-14));
    CHECK(n[0] == Approx(1.0 - lr * u0).epsilon(1e-14));
    CHECK(n[1] == Approx(-2.0 - lr * u1).epsilon(1e-14));
    CHECK(opt.m()[0] == Approx(0.05).epsilon(1e-14));
    CHECK(opt.v()[1] == Approx(0.05).epsilon(1e-14));

    // Step 2 with g = (1, 1): m = (0.145, 0.01), v = (0.061875, 0.0975).
    const double p0 = w[0], p1 = w[1];
    set(ps.grad(0), {1.0, 1.0});
    opt.step(ps, 1, lr);
    const double bc1 = 1 - 0.81, bc2 = 1 - 0.9025;
    const double e0 = (0.145 / bc1) / (std::sqrt(0.061875 / bc2) + 1e-8);
    const double e1 = (0.01 / bc1) / (std::sqrt(0.0975 / bc2) + 1e-8);
    CHECK(w[0] == Approx(p0 * keep - lr * e0).epsilon(1e-13));
    CHECK(w[1] == Approx(p1 * keep - lr * e1).epsilon(1e-13));
  }
}

// ---------------------------------------------------------------- data

TEST_CASE("synthetic data: deterministic, in range, and learnable", "[data]") {
  const int vocab = 64;
  auto src = make_token_source("synthetic", vocab, 7, 128);
  std::vector<std::int32_t> a(129), b(129), c(129), d(129);
  src->sequence(3, 5, 129, a.data());
  src->sequence(3, 5, 129, b.data());
  src->sequence(3, 6, 129, c.data());
  src->sequence(4, 5, 129, d.data());
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);
  // A fresh source with the same seed gives the same tokens; another seed does not.
  std::vector<std::int32_t> e(129), f(129);
  make_token_source("synthetic", vocab, 7, 128)->sequence(3, 5, 129, e.data());
  make_token_source("synthetic", vocab, 8, 128)->sequence(3, 5, 129, f.data());
  CHECK(a == e);
  CHECK(a != f);

  const double h = src->unigram_entropy();
  CHECK(h > 0);
  CHECK(h < std::log(double(vocab)));
  CHECK_THAT(src->describe(), Contains("synthetic"));

  // Structure: the 4 most frequent successors of each token carry most transitions.
  std::map<std::pair<int, int>, int> bigram;
  std::vector<std::int32_t> s(257);
  for (int i = 0; i < 200; ++i) {
    src->sequence(0, i, 257, s.data());
    for (std::size_t t = 0; t < s.size(); ++t) {
      REQUIRE(s[t] >= 0);
      REQUIRE(s[t] < vocab);
      if (t > 0) ++bigram[{s[t - 1], s[t]}];
    }
  }
  std::vector<std::vector<int>> per(vocab);
  int total = 0;
  for (const auto& [k, n] : bigram) per[k.first].push_back(n), total += n;
  int top = 0;
  for (auto& v : per) {
    std::sort(v.rbegin(), v.rend());
    for (std::size_t i = 0; i < v.size() && i < 4; ++i) top += v[i];
  }
  CHECK(double(top) / total > 0.9);
}

TEST_CASE("text data: byte tokens from data/public_domain.txt", "[data]") {
  const std::string path = find_public_domain_text();
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(text.size() >= 60000);

  auto src = make_token_source(path, 256, 1, 64);
  std::vector<std::int32_t> a(65), b(65), c(65);
  src->sequence(2, 0, 65, a.data());
  src->sequence(2, 0, 65, b.data());
  src->sequence(2, 1, 65, c.data());
  CHECK(a == b);
  CHECK(a != c);
  // Each sequence is a window of the file.
  std::string window;
  for (const std::int32_t t : a) {
    REQUIRE(t >= 0);
    REQUIRE(t < 256);
    window += char(t);
  }
  CHECK(text.find(window) != std::string::npos);
  // English bytes: a few nats, below the uniform log(256).
  CHECK(src->unigram_entropy() > 2.0);
  CHECK(src->unigram_entropy() < std::log(256.0));
  CHECK_THAT(src->describe(), Contains(path));

  CHECK_THROWS_WITH(make_token_source(path, 100, 1, 64),
                    Contains("vocab_size = 100") && Contains(path));
}

TEST_CASE("text data: missing and short files are errors naming the file", "[data]") {
  TempDir tmp;
  CHECK_THROWS_WITH(make_token_source(tmp / "none.txt", 256, 1, 8), Contains(tmp / "none.txt"));
  const std::string shorty = tmp / "short.txt";
  std::ofstream(shorty) << "0123456789";
  CHECK_THROWS_WITH(make_token_source(shorty, 256, 1, 64),
                    Contains(shorty) && Contains("has 10 bytes") && Contains("needs 65"));
  CHECK_NOTHROW(make_token_source(shorty, 256, 1, 9));  // exactly seq_len + 1
}

// ---------------------------------------------------------------- token files

namespace {

// Writes ids as a raw little-endian stream of E (the host is little-endian).
template <typename E>
void write_raw(const std::string& path, const std::vector<std::int64_t>& ids) {
  std::ofstream out(path, std::ios::binary);
  for (const std::int64_t id : ids) {
    const E e = E(id);
    out.write(reinterpret_cast<const char*>(&e), sizeof e);
  }
  REQUIRE(out.good());
}

// Writes ids as a 1-D .npy of E (int32_t or int64_t).
template <typename E>
void write_ids_npy(const std::string& path, const std::vector<std::int64_t>& ids) {
  Tensor<E> t(Shape{std::int64_t(ids.size())});
  for (std::size_t i = 0; i < ids.size(); ++i) t.data[i] = E(ids[i]);
  write_npy(path, t);
}

// The same ids in all four formats; returns the paths.
std::vector<std::string> write_all_formats(const TempDir& tmp, const std::string& stem,
                                           const std::vector<std::int64_t>& ids) {
  const std::vector<std::string> paths = {tmp / (stem + ".u16"), tmp / (stem + ".u32"),
                                          tmp / (stem + "_i32.npy"), tmp / (stem + "_i64.npy")};
  write_raw<std::uint16_t>(paths[0], ids);
  write_raw<std::uint32_t>(paths[1], ids);
  write_ids_npy<std::int32_t>(paths[2], ids);
  write_ids_npy<std::int64_t>(paths[3], ids);
  return paths;
}

// Random ids over the whole uint16 range (ids >= 32768 show that uint16 is read unsigned),
// with both ends of the range present.
std::vector<std::int64_t> random_ids(std::int64_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t& x : ids) x = std::int64_t(rng.next_u64() % 65536);
  ids[0] = 65535;
  ids[std::size_t(n) - 1] = 0;
  return ids;
}

// Every offset at which seq is a window of the stream.
std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& stream,
                                     const std::vector<std::int32_t>& seq) {
  std::vector<std::int64_t> out;
  for (std::size_t o = 0; o + seq.size() <= stream.size(); ++o)
    if (std::equal(seq.begin(), seq.end(), stream.begin() + std::ptrdiff_t(o))) out.push_back(o);
  return out;
}

}  // namespace

TEST_CASE("token files: every sequence is a window of the stream, the same in every format",
          "[data]") {
  TempDir tmp;
  const int vocab = 151936;
  const std::int64_t n = 300, seq_len = 32, len = seq_len + 1;
  const std::vector<std::int64_t> ids = random_ids(n, 5);
  const std::vector<std::string> paths = write_all_formats(tmp, "tokens", ids);
  std::vector<std::unique_ptr<TokenSource>> src;
  for (const std::string& p : paths) src.push_back(make_token_source(p, vocab, 11, seq_len));

  std::vector<std::int32_t> seq(len), other(len);
  for (std::int64_t step = 0; step < 4; ++step) {
    for (std::int64_t index = 0; index < 50; ++index) {
      src[0]->sequence(step, index, len, seq.data());
      for (const std::int32_t t : seq) {
        REQUIRE(t >= 0);
        REQUIRE(t < vocab);
      }
      INFO("step " << step << ", index " << index);
      REQUIRE(!offsets_of(ids, seq).empty());
      // The same windows whatever the format: the offsets depend on (seed, step, index)
      // and the stream's length only.
      for (std::size_t f = 1; f < src.size(); ++f) {
        src[f]->sequence(step, index, len, other.data());
        REQUIRE(other == seq);
      }
    }
  }
  CHECK_THAT(src[0]->describe(),
             Contains(paths[0]) && Contains("300 tokens, uint16") && Contains("unigram entropy"));
  CHECK_THAT(src[1]->describe(), Contains("300 tokens, uint32"));
  CHECK_THAT(src[2]->describe(), Contains("300 tokens, int32"));
  CHECK_THAT(src[3]->describe(), Contains(paths[3]) && Contains("300 tokens, int64"));

  // Ids beyond 16 bits (up to 248319, Qwen3.5's vocabulary) come back whole from .u32
  // and int64 .npy: the same windows, shifted by the offset that was added.
  const std::int64_t shift = 180000;
  std::vector<std::int64_t> big = ids;
  for (std::int64_t& x : big) x += shift;
  write_raw<std::uint32_t>(tmp / "big.u32", big);
  write_ids_npy<std::int64_t>(tmp / "big.npy", big);
  for (const std::string& p : {tmp / "big.u32", tmp / "big.npy"}) {
    auto s = make_token_source(p, 248320, 11, seq_len);
    for (std::int64_t index = 0; index < 20; ++index) {
      src[0]->sequence(1, index, len, seq.data());
      s->sequence(1, index, len, other.data());
      for (std::int64_t i = 0; i < len; ++i) REQUIRE(other[i] == seq[i] + shift);
    }
  }

  // Windows reach both ends of the stream and never run past it: with 8 possible offsets
  // (n = 40, len 33), 200 draws see each of them.
  const std::vector<std::int64_t> small(ids.begin(), ids.begin() + 40);
  write_raw<std::uint16_t>(tmp / "small.u16", small);
  auto s = make_token_source(tmp / "small.u16", vocab, 3, seq_len);
  std::map<std::int64_t, int> seen;
  for (std::int64_t index = 0; index < 200; ++index) {
    s->sequence(0, index, len, seq.data());
    const std::vector<std::int64_t> o = offsets_of(small, seq);
    REQUIRE(o.size() == 1);
    ++seen[o[0]];
  }
  CHECK(seen.size() == 8);
  CHECK(seen.begin()->first == 0);
  CHECK(seen.rbegin()->first == 7);
  // Exactly seq_len + 1 tokens: one window, the whole stream.
  const std::vector<std::int64_t> exact(ids.begin(), ids.begin() + len);
  write_raw<std::uint32_t>(tmp / "exact.u32", exact);
  make_token_source(tmp / "exact.u32", vocab, 3, seq_len)->sequence(9, 9, len, seq.data());
  CHECK(offsets_of(exact, seq) == std::vector<std::int64_t>{0});
}

TEST_CASE("token files: deterministic in (seed, step, index), independent of call order",
          "[data]") {
  TempDir tmp;
  const std::int64_t seq_len = 16, len = seq_len + 1;
  const std::vector<std::int64_t> ids = random_ids(5000, 8);
  for (const std::string& path : write_all_formats(tmp, "det", ids)) {
    INFO(path);
    auto draw = [&](const TokenSource& src, std::int64_t step, std::int64_t index) {
      std::vector<std::int32_t> s(len);
      src.sequence(step, index, len, s.data());
      return s;
    };
    // One source draws the grid in order, a fresh one in reverse order.
    auto a = make_token_source(path, 65536, 21, seq_len);
    auto b = make_token_source(path, 65536, 21, seq_len);
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int32_t>> fwd, rev;
    for (std::int64_t step = 0; step < 5; ++step)
      for (std::int64_t index = 0; index < 8; ++index) fwd[{step, index}] = draw(*a, step, index);
    for (std::int64_t step = 4; step >= 0; --step)
      for (std::int64_t index = 7; index >= 0; --index) rev[{step, index}] = draw(*b, step, index);
    CHECK(fwd == rev);
    CHECK(draw(*a, 2, 3) == fwd[{2, 3}]);  // again, after the others
    // Another step, index or seed gives another window.
    CHECK(fwd[{2, 3}] != fwd[{2, 4}]);
    CHECK(fwd[{2, 3}] != fwd[{3, 3}]);
    auto c = make_token_source(path, 65536, 22, seq_len);
    CHECK(draw(*c, 2, 3) != fwd[{2, 3}]);
  }
}

TEST_CASE("token files: unigram entropy from the token frequencies", "[data]") {
  TempDir tmp;
  // Frequencies 1/2, 1/4, 1/8, 1/8: H = 1/2 ln 2 + 1/4 ln 4 + 2/8 ln 8 = 1.75 ln 2.
  const double h = 1.75 * std::log(2.0);
  for (const std::string& path : write_all_formats(tmp, "freq", {0, 1, 0, 2, 0, 1, 3, 0})) {
    INFO(path);
    const auto src = make_token_source(path, 4, 1, 4);
    CHECK(src->unigram_entropy() == Approx(h).epsilon(1e-14));
    CHECK_THAT(src->describe(), Contains("8 tokens"));
  }
  // The same frequencies at the ends of a 248320-token vocabulary.
  write_raw<std::uint32_t>(tmp / "wide.u32", {248319, 7, 248319, 151935, 248319, 7, 0, 248319});
  CHECK(make_token_source(tmp / "wide.u32", 248320, 1, 4)->unigram_entropy() ==
        Approx(h).epsilon(1e-14));
  // A single distinct token: zero entropy.
  write_raw<std::uint16_t>(tmp / "one.u16", {5, 5, 5, 5});
  CHECK(make_token_source(tmp / "one.u16", 6, 1, 3)->unigram_entropy() == 0.0);
}

TEST_CASE("token files: a .u16 of a text's bytes reads exactly what the text source reads",
          "[data]") {
  TempDir tmp;
  const std::string text_path = find_public_domain_text();
  std::ifstream in(text_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::int64_t> bytes(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) bytes[i] = static_cast<unsigned char>(text[i]);
  write_raw<std::uint16_t>(tmp / "text.u16", bytes);
  auto as_text = make_token_source(text_path, 256, 4, 128);
  auto as_tokens = make_token_source(tmp / "text.u16", 256, 4, 128);
  // The same counts summed in the same order: the same bits.
  CHECK(as_tokens->unigram_entropy() == as_text->unigram_entropy());
  std::vector<std::int32_t> a(129), b(129);
  for (std::int64_t index = 0; index < 64; ++index) {
    as_text->sequence(index % 5, index, 129, a.data());
    as_tokens->sequence(index % 5, index, 129, b.data());
    REQUIRE(a == b);
  }
  CHECK_THAT(as_tokens->describe(), Contains(std::to_string(text.size()) + " tokens, uint16"));
}

TEST_CASE("token files: bad input is an error naming the file and what was expected", "[data]") {
  TempDir tmp;
  const std::vector<std::int64_t> ok(100, 1);
  // Missing, a directory.
  for (const std::string& p : {tmp / "none.u16", tmp / "none.u32", tmp / "none.npy"})
    CHECK_THROWS_WITH(make_token_source(p, 256, 1, 8),
                      Contains("cannot open token file '" + p + "'") && Contains("No such file") &&
                          Contains("expected"));
  fs::create_directory(tmp / "dir.u16");
  fs::create_directory(tmp / "dir.npy");
  CHECK_THROWS_WITH(make_token_source(tmp / "dir.u16", 256, 1, 8),
                    Contains(tmp / "dir.u16") && Contains("is a directory") &&
                        Contains("raw little-endian stream of uint16 token ids"));
  CHECK_THROWS_WITH(make_token_source(tmp / "dir.npy", 256, 1, 8),
                    Contains(tmp / "dir.npy") && Contains("is a directory") &&
                        Contains("1-D int32 or int64 array"));
  // Raw sizes that are not a whole number of ids.
  std::ofstream(tmp / "odd.u16", std::ios::binary) << std::string(201, 'a');
  std::ofstream(tmp / "odd.u32", std::ios::binary) << std::string(402, 'a');
  CHECK_THROWS_WITH(make_token_source(tmp / "odd.u16", 65536, 1, 8),
                    Contains(tmp / "odd.u16") && Contains("has 201 bytes, not a multiple of 2"));
  CHECK_THROWS_WITH(make_token_source(tmp / "odd.u32", 1 << 30, 1, 8),
                    Contains(tmp / "odd.u32") && Contains("has 402 bytes, not a multiple of 4") &&
                        Contains("uint32"));
  // Shorter than seq_len + 1; empty.
  const std::vector<std::int64_t> ten(10, 3);
  for (const std::string& p : write_all_formats(tmp, "short", ten)) {
    CHECK_THROWS_WITH(make_token_source(p, 256, 1, 64),
                      Contains(p) && Contains("has 10 tokens") && Contains("needs 65"));
    CHECK_NOTHROW(make_token_source(p, 256, 1, 9));  // exactly seq_len + 1
  }
  std::ofstream(tmp / "empty.u32", std::ios::binary).close();
  CHECK_THROWS_WITH(make_token_source(tmp / "empty.u32", 256, 1, 8),
                    Contains(tmp / "empty.u32") && Contains("has 0 tokens"));
  // .npy files that are not a 1-D int32/int64 array, or not .npy at all.
  write_npy(tmp / "2d.npy", Tensor<std::int32_t>(Shape{10, 10}, 1));
  write_npy(tmp / "f32.npy", Tensor<float>(Shape{100}, 1));
  write_npy(tmp / "f64.npy", Tensor<double>(Shape{100}, 1));
  write_npy(tmp / "0d.npy", Tensor<std::int64_t>(Shape{}, 1));
  CHECK_THROWS_WITH(make_token_source(tmp / "2d.npy", 256, 1, 8),
                    Contains(tmp / "2d.npy") && Contains("i32 data of shape [10, 10]") &&
                        Contains("expected a 1-D int32 or int64 array of token ids"));
  CHECK_THROWS_WITH(make_token_source(tmp / "f32.npy", 256, 1, 8),
                    Contains(tmp / "f32.npy") && Contains("f32 data of shape [100]") &&
                        Contains("expected a 1-D int32 or int64 array"));
  CHECK_THROWS_WITH(make_token_source(tmp / "f64.npy", 256, 1, 8),
                    Contains(tmp / "f64.npy") && Contains("f64 data"));
  CHECK_THROWS_WITH(make_token_source(tmp / "0d.npy", 256, 1, 8),
                    Contains(tmp / "0d.npy") && Contains("shape []"));
  std::ofstream(tmp / "text.npy", std::ios::binary) << std::string(200, 'x');
  CHECK_THROWS_WITH(make_token_source(tmp / "text.npy", 256, 1, 8),
                    Contains(tmp / "text.npy") && Contains("not a .npy file"));
  write_ids_npy<std::int32_t>(tmp / "cut.npy", ok);
  fs::resize_file(tmp / "cut.npy", fs::file_size(tmp / "cut.npy") - 1);
  CHECK_THROWS_WITH(make_token_source(tmp / "cut.npy", 256, 1, 8),
                    Contains(tmp / "cut.npy") && Contains("truncated data"));
  // Ids outside [0, vocab_size): the first bad index and its value.
  std::vector<std::int64_t> bad = ok;
  bad[5] = 300;
  bad[6] = 400;  // a later one is not reported
  for (const std::string& p : write_all_formats(tmp, "range", bad))
    CHECK_THROWS_WITH(make_token_source(p, 256, 1, 8),
                      Contains(p) && Contains("the token at index 5 is 300, outside [0, 256)") &&
                          Contains("larger vocabulary"));
  bad = ok;
  bad[99] = 256;  // the last id, just past the end
  write_raw<std::uint16_t>(tmp / "edge.u16", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "edge.u16", 256, 1, 8),
                    Contains("index 99 is 256, outside [0, 256)"));
  CHECK_NOTHROW(make_token_source(tmp / "edge.u16", 257, 1, 8));
  bad = ok;
  bad[0] = 0xFFFFFFFFll;
  write_raw<std::uint32_t>(tmp / "max.u32", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "max.u32", 248320, 1, 8),
                    Contains(tmp / "max.u32") && Contains("index 0 is 4294967295"));
  bad = ok;
  bad[3] = -1;
  write_ids_npy<std::int32_t>(tmp / "neg32.npy", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "neg32.npy", 256, 1, 8),
                    Contains(tmp / "neg32.npy") && Contains("index 3 is -1, outside [0, 256)"));
  bad[3] = -(1ll << 40);
  bad[4] = 1ll << 40;
  write_ids_npy<std::int64_t>(tmp / "neg64.npy", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "neg64.npy", 256, 1, 8),
                    Contains(tmp / "neg64.npy") && Contains("index 3 is -1099511627776"));
  bad[3] = 1;
  write_ids_npy<std::int64_t>(tmp / "big64.npy", bad);
  CHECK_THROWS_WITH(make_token_source(tmp / "big64.npy", 248320, 1, 8),
                    Contains(tmp / "big64.npy") && Contains("index 4 is 1099511627776"));
}

// ---------------------------------------------------------------- sequence slices

namespace {

// A source that only knows whole windows: it gets TokenSource's default window_part.
class WholeWindowSource final : public TokenSource {
 public:
  void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                std::int32_t* out) const override {
    for (std::int64_t i = 0; i < len; ++i) out[i] = std::int32_t((step * 31 + index * 7 + i) % 97);
  }
  double unigram_entropy() const override { return 0; }
  std::string describe() const override { return "whole windows"; }
};

}  // namespace

TEST_CASE("window_part gives exactly that part of sequence()'s window, for every source",
          "[data]") {
  TempDir tmp;
  const std::int64_t seq_len = 128, len = seq_len + 1;
  std::vector<std::pair<std::string, std::unique_ptr<TokenSource>>> sources;
  sources.emplace_back("synthetic", make_token_source("synthetic", 64, 7, seq_len));
  sources.emplace_back("text", make_token_source(find_public_domain_text(), 256, 3, seq_len));
  for (const std::string& p : write_all_formats(tmp, "slice", random_ids(5000, 9)))
    sources.emplace_back(p, make_token_source(p, 65536, 3, seq_len));
  sources.emplace_back("default", std::make_unique<WholeWindowSource>());

  // Slices at the start, in the middle, to the end, the last token alone, empty ones
  // (also at the very end), the whole window; and every cp rank's [t0, t1 + 1) as the
  // trainer reads them, for several cp.
  std::vector<std::pair<std::int64_t, std::int64_t>> slices = {
      {0, 0},    {0, 1},       {0, 2},       {0, 64},  {37, 50}, {64, 65},
      {100, 29}, {len - 1, 1}, {len - 2, 2}, {len, 0}, {50, 0},  {0, len}};
  for (const int cp : {1, 2, 3, 4, 7, 128}) {
    const std::int64_t per = (seq_len + cp - 1) / cp;
    for (int r = 0; r < cp; ++r) {
      const std::int64_t b = std::min(seq_len, per * r), e = std::min(seq_len, per * (r + 1));
      slices.push_back({b, e - b + 1});
    }
  }
  for (const auto& [name, src] : sources) {
    INFO(name);
    for (const auto& [step, index] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 0}, {0, 5}, {3, 1}, {11, 40}}) {
      std::vector<std::int32_t> whole(len);
      src->sequence(step, index, len, whole.data());
      for (const auto& [begin, count] : slices) {
        INFO("step " << step << ", index " << index << ", tokens [" << begin << ", "
                     << begin + count << ")");
        // Guards around the slice: nothing outside [out, out + count) is written.
        std::vector<std::int32_t> part(std::size_t(count) + 2, -7);
        src->window_part(step, index, len, begin, count, part.data() + 1);
        REQUIRE(part.front() == -7);
        REQUIRE(part.back() == -7);
        REQUIRE(std::equal(part.begin() + 1, part.end() - 1, whole.begin() + begin));
      }
    }
    // A slice outside the window is refused.
    std::vector<std::int32_t> out(len + 1);
    CHECK_THROWS_WITH(src->window_part(0, 0, len, len - 1, 2, out.data()),
                      Contains("tokens [128, 130) are not inside a window of 129 tokens"));
    CHECK_THROWS_WITH(src->window_part(0, 0, len, -1, 1, out.data()), Contains("[-1, 0)"));
    CHECK_THROWS_WITH(src->window_part(0, 0, len, 0, -1, out.data()),
                      Contains("not inside a window"));
  }
}

TEST_CASE("file sources read from the file at each window: one that shrank is an error", "[data]") {
  TempDir tmp;
  const std::vector<std::int64_t> ids = random_ids(1000, 4);
  std::vector<std::string> paths = write_all_formats(tmp, "shrink", ids);
  {
    std::ofstream text(tmp / "shrink.txt", std::ios::binary);
    for (const std::int64_t x : ids) text << char('a' + x % 26);
  }
  paths.push_back(tmp / "shrink.txt");
  for (const std::string& p : paths) {
    INFO(p);
    const auto src = make_token_source(p, 65536, 5, 100);
    std::vector<std::int32_t> seq(101);
    CHECK_NOTHROW(src->sequence(0, 0, 101, seq.data()));
    fs::resize_file(p, 64);  // shorter than any window's end at byte >= 64 of the data
    CHECK_THROWS_WITH(
        [&] {
          for (std::int64_t index = 0; index < 20; ++index)
            src->sequence(0, index, 101, seq.data());
        }(),
        Contains(p) && Contains("must not change during the run"));
  }
  // A text "file" that is a FIFO (or any other non-regular file) is refused at once
  // instead of waiting for a writer.
  const std::string fifo = tmp / "fifo.txt";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(make_token_source(fifo, 256, 1, 8),
                    Contains("data file '" + fifo + "' is not a regular file"));
  fs::create_directory(tmp / "dir.txt");
  CHECK_THROWS_WITH(make_token_source(tmp / "dir.txt", 256, 1, 8),
                    Contains("data file '" + tmp / "dir.txt" +
                             "' is a directory: expected a text "
                             "file (train.data is \"synthetic\" or the path of a text file)"));
  CHECK_THROWS_WITH(make_token_source(tmp / "none.txt", 256, 1, 8),
                    Contains("cannot open data file '" + tmp / "none.txt" +
                             "': No such file or directory (train.data is \"synthetic\""));
}

// ---------------------------------------------------------------- checkpoint

namespace {

std::vector<ParamInfo> make_model(Shape embed_shape = {3, 4}) {
  ParamStore<float, Host> ps;  // only the table of names, shapes and offsets is used
  ps.add("embed", std::move(embed_shape), true);
  ps.add("layers.0.norm", {4}, false);
  return ps.infos();
}

std::size_t elements(const std::vector<ParamInfo>& params) {
  return std::size_t(params.back().offset + params.back().size);
}

// Seeded values and non-zero moments.
template <typename T>
CheckpointData<T> some_state(const std::vector<ParamInfo>& params, std::uint64_t seed) {
  Rng rng(seed);
  const std::size_t n = elements(params);
  CheckpointData<T> d{std::vector<T>(n), std::vector<T>(n), std::vector<T>(n)};
  for (std::vector<T>* x : {&d.values, &d.m, &d.v})
    for (T& e : *x) e = T(rng.normal());
  for (T& e : d.v) e = e * e;
  return d;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

std::vector<std::string> dir_listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEMPLATE_TEST_CASE("checkpoint round trip is bit-exact", "[checkpoint]", float, double) {
  TempDir tmp;
  const std::string dir = tmp / "ckpt";  // created by the save
  const std::vector<ParamInfo> params = make_model();
  const CheckpointData<TestType> d = some_state<TestType>(params, 11);
  TrainingState st;
  st.step = 3;
  st.config_json = R"({"train": {"seed": 1}})";
  save_checkpoint(dir, st, params, d);
  CHECK(dir_listing(dir) == std::vector<std::string>{"ckpt-00000003.bin"});  // no .tmp left
  REQUIRE(latest_checkpoint(dir) == (fs::path(dir) / "ckpt-00000003.bin").string());

  CheckpointData<TestType> got;
  const TrainingState s = load_checkpoint(*latest_checkpoint(dir), params, got);
  CHECK(s.step == 3);
  CHECK(s.config_json == st.config_json);
  CHECK(same_bits(got.values, d.values));
  CHECK(same_bits(got.m, d.m));
  CHECK(same_bits(got.v, d.v));
}

TEST_CASE("an f32 checkpoint loads into f64 parameters and back", "[checkpoint]") {
  TempDir tmp;
  const std::vector<ParamInfo> params = make_model();
  const CheckpointData<float> f = some_state<float>(params, 5);
  save_checkpoint(tmp.dir.string(), TrainingState{7, "{}"}, params, f);
  CheckpointData<double> d;
  CHECK(load_checkpoint(tmp / "ckpt-00000007.bin", params, d).step == 7);
  for (std::size_t e = 0; e < elements(params); ++e) {
    CHECK(d.values[e] == double(f.values[e]));
    CHECK(d.m[e] == double(f.m[e]));
    CHECK(d.v[e] == double(f.v[e]));
  }
  // And f64 into f32: values round to the nearest float.
  save_checkpoint(tmp.dir.string(), TrainingState{8, "{}"}, params, d);
  CheckpointData<float> f2;
  load_checkpoint(tmp / "ckpt-00000008.bin", params, f2);
  CHECK(same_bits(f.values, f2.values));
}

TEST_CASE("latest_checkpoint skips torn and corrupt files", "[checkpoint]") {
  TempDir tmp;
  const std::string dir = tmp.dir.string();
  CHECK_FALSE(latest_checkpoint(dir).has_value());
  CHECK_FALSE(latest_checkpoint(tmp / "missing").has_value());

  const std::vector<ParamInfo> params = make_model();
  const CheckpointData<float> d = some_state<float>(params, 3);
  for (std::int64_t step : {3, 5, 7}) save_checkpoint(dir, TrainingState{step, "{}"}, params, d);
  CHECK(latest_checkpoint(dir) == tmp / "ckpt-00000007.bin");

  // Step 7: one flipped byte in the tensor data.
  const std::string p7 = tmp / "ckpt-00000007.bin";
  {
    std::fstream f(p7, std::ios::in | std::ios::out | std::ios::binary);
    const auto pos = std::streamoff(fs::file_size(p7) / 2);
    f.seekg(pos);
    char ch = 0;
    f.read(&ch, 1);
    ch = char(ch ^ 0x10);
    f.seekp(pos);
    f.write(&ch, 1);
  }
  // Step 5: torn (truncated) as if the writer died mid-file.
  const std::string p5 = tmp / "ckpt-00000005.bin";
  fs::resize_file(p5, fs::file_size(p5) - 20);
  CHECK(latest_checkpoint(dir) == tmp / "ckpt-00000003.bin");

  CheckpointData<float> got;
  CHECK_THROWS_WITH(load_checkpoint(p7, params, got), Contains(p7) && Contains("checksum"));
  CHECK_THROWS_WITH(load_checkpoint(p5, params, got), Contains(p5) && Contains("truncated"));
}

TEST_CASE("a non-finite value is never written, and a file holding one is never loaded",
          "[checkpoint]") {
  TempDir tmp;
  const std::string dir = tmp.dir.string();
  const std::vector<ParamInfo> params = make_model();
  CheckpointData<double> d = some_state<double>(params, 4);
  save_checkpoint(dir, TrainingState{1, "{}"}, params, d);
  d.m[13] = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(save_checkpoint(dir, TrainingState{2, "{}"}, params, d),
                    Contains("step 2") && Contains("AdamW moment of 'layers.0.norm'"));
  CHECK(dir_listing(dir) == std::vector<std::string>{"ckpt-00000001.bin"});
  // A file with a NaN that is otherwise complete (its checksum matches, as if an older
  // gdn-cp had written it): latest_checkpoint passes over it, load_checkpoint refuses it.
  const std::string p1 = tmp / "ckpt-00000001.bin", p9 = tmp / "ckpt-00000009.bin";
  std::vector<char> bytes;
  {
    std::ifstream in(p1, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::uint64_t hlen = [&] {
    std::uint64_t x;
    std::memcpy(&x, bytes.data() + 8, 8);
    return x;
  }();
  const double nan = std::nan("");
  std::memcpy(bytes.data() + 16 + hlen, &nan, 8);  // the first value of 'embed'
  std::uint64_t h = 0xcbf29ce484222325ull;         // FNV-1a-64 of everything before it
  for (std::size_t i = 0; i + 16 < bytes.size(); ++i)
    h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  std::memcpy(bytes.data() + bytes.size() - 16, &h, 8);
  std::ofstream(p9, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  CHECK(latest_checkpoint(dir) == p1);
  CheckpointData<double> got;
  CHECK_THROWS_WITH(load_checkpoint(p9, params, got), Contains(p9) && Contains("non-finite"));
}

TEST_CASE("the checkpoint rotation keeps the newest N of this run's, and only those",
          "[checkpoint]") {
  TempDir tmp;
  const std::string dir = tmp.dir.string();
  const std::vector<ParamInfo> params = make_model();
  const CheckpointData<float> d = some_state<float>(params, 8);
  for (std::int64_t step : {1, 2, 3, 10, 4})
    save_checkpoint(dir, TrainingState{step, "{}"}, params, d);
  std::ofstream(tmp / "ckpt-00000099.bin") << "random bytes named like the newest checkpoint";
  // Step 3's is another run's: the rotation never counts or deletes it.
  const auto ours = [](const TrainingState& s) {
    return s.step == 3 ? std::string("was written by another run") : std::string();
  };
  CheckpointRotation keep_all(dir, 0, scan_checkpoints(dir), ours);
  CHECK(keep_all.saved(4).empty());  // 0 keeps all
  CheckpointRotation rotation(dir, 2, scan_checkpoints(dir), ours);
  REQUIRE(rotation.foreign().size() == 2);
  CHECK(rotation.foreign()[0].first == tmp / "ckpt-00000099.bin");
  CHECK_THAT(rotation.foreign()[1].second,
             Contains(tmp / "ckpt-00000003.bin") && Contains("another run"));
  save_checkpoint(dir, TrainingState{11, "{}"}, params, d);
  CHECK(rotation.saved(11).size() == 3);  // 1, 2 and 4
  CHECK(dir_listing(dir) == std::vector<std::string>{"ckpt-00000003.bin", "ckpt-00000010.bin",
                                                     "ckpt-00000011.bin", "ckpt-00000099.bin"});
}

TEST_CASE("check_checkpoint_dir gives the OS's reason at start-up", "[checkpoint]") {
  TempDir tmp;
  CHECK_NOTHROW(check_checkpoint_dir(tmp / "new/nested"));
  CHECK(fs::is_directory(tmp / "new/nested"));
  CHECK(dir_listing(tmp / "new/nested").empty());  // the probe is gone
  const std::string file = tmp / "a_file";
  std::ofstream(file) << "x";
  CHECK_THROWS_WITH(check_checkpoint_dir(file), Contains(file) && Contains("Not a directory"));
  CHECK_THROWS_WITH(check_checkpoint_dir(file + "/sub"), Contains(file + "/sub"));
}

TEST_CASE("loading into a model of another shape names the parameter", "[checkpoint]") {
  TempDir tmp;
  const std::vector<ParamInfo> params = make_model();
  save_checkpoint(tmp.dir.string(), TrainingState{1, "{}"}, params, some_state<double>(params, 9));
  const std::string path = tmp / "ckpt-00000001.bin";

  CheckpointData<double> got;
  CHECK_THROWS_WITH(
      load_checkpoint(path, make_model({3, 5}), got),
      Contains(path) && Contains("parameter 'embed'") && Contains("[3, 4]") && Contains("[3, 5]"));
  CHECK(got.values.empty());  // nothing was written

  ParamStore<double, Host> renamed;
  renamed.add("embedding", {3, 4}, true);
  renamed.add("layers.0.norm", {4}, false);
  CHECK_THROWS_WITH(load_checkpoint(path, renamed.infos(), got),
                    Contains("'embed'") && Contains("'embedding'"));

  ParamStore<double, Host> more;
  more.add("embed", {3, 4}, true);
  more.add("layers.0.norm", {4}, false);
  more.add("lm_head", {4, 3}, true);
  CHECK_THROWS_WITH(load_checkpoint(path, more.infos(), got), Contains("lm_head"));
}
