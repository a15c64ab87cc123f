// Unit tests of the training pieces that need no MPI: config parsing and layout checks,
// learning-rate schedule, AdamW and clipping against hand-computed values, the token
// sources, and checkpoints (round trip, dtype conversion, torn and corrupt files).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/data.h"
#include "train/optimizer.h"

using namespace gdn;
using Catch::Contains;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path dir;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gdn_test_train_XXXXXX").string();
    char* d = mkdtemp(tmpl.data());
    if (!d) throw std::runtime_error("mkdtemp failed");
    dir = d;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

json valid_config() {
  return json::parse(R"({
    "model": {"vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2,
              "intermediate_size": 128, "linear_num_key_heads": 2,
              "linear_num_value_heads": 4, "linear_key_head_dim": 16,
              "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
              "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
              "initializer_range": 0.02},
    "train": {"seq_len": 100, "batch_size": 4, "steps": 6, "lr": 0.003,
              "warmup_steps": 2, "weight_decay": 0.1, "grad_clip": 1.0, "seed": 42,
              "dtype": "f64", "cp": 2, "dp": 2, "chunk_size": 16,
              "context_parallel_load_balance": false, "data": "synthetic",
              "log": "run.jsonl", "checkpoint_dir": "ckpt", "checkpoint_every": 3}
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
  CHECK(c.train.dtype == "f64");
  CHECK(c.train.seed == 42);
  CHECK(c.train.checkpoint_every == 3);
  CHECK(c.ignored_model_keys.empty());
  CHECK(c.source == "test.json");
  CHECK(to_json(parse(to_json(c))) == to_json(c));
  CHECK(to_json(c) == valid_config());
  CHECK_NOTHROW(validate_layout(c, 4));
}

TEST_CASE("a Hugging Face config.json works as \"model\"; unused keys are listed", "[config]") {
  json j = valid_config();
  j["model"]["model_type"] = "qwen3_next";
  j["model"]["num_attention_heads"] = 16;
  j["model"]["rope_theta"] = 10000000.0;
  j["model"]["layer_types"] = {"linear_attention", "full_attention"};
  const RunConfig c = parse(j);
  std::vector<std::string> ignored = c.ignored_model_keys;
  std::sort(ignored.begin(), ignored.end());
  CHECK(ignored ==
        std::vector<std::string>{"layer_types", "model_type", "num_attention_heads", "rope_theta"});
}

TEST_CASE("optional model keys take their defaults", "[config]") {
  json j = valid_config();
  for (const char* k :
       {"linear_conv_kernel_dim", "rms_norm_eps", "tie_word_embeddings", "initializer_range"})
    j["model"].erase(k);
  j["train"] = {{"seq_len", 8}};
  const RunConfig c = parse(j);
  CHECK(c.model.linear_conv_kernel_dim == 4);
  CHECK(c.model.initializer_range == 0.02);
  CHECK_FALSE(c.model.tie_word_embeddings);
  CHECK(c.train.dtype == "f32");
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

TEST_CASE("a missing model key is an error naming it", "[config]") {
  json j = valid_config();
  j["model"].erase("linear_value_head_dim");
  CHECK_THROWS_WITH(parse(j),
                    Contains("model key 'linear_value_head_dim' is missing in test.json"));
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
  CHECK_THROWS_WITH(parse(json::array()), Contains("test.json"));
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
                    Contains("seq_len 3 is below cp 4") &&
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

TEST_CASE("clip_grad_norm scales to max_norm and returns the norm before", "[optimizer]") {
  ParamStore<double> ps;
  ps.add("a", {2}, true).grad.data = {3, 4};
  ps.add("b", {1}, false).grad.data = {12};
  CHECK(clip_grad_norm(ps, 0.0) == 13.0);  // 0: report only
  CHECK(ps[0].grad.data == std::vector<double>{3, 4});
  CHECK(clip_grad_norm(ps, 20.0) == 13.0);  // below the limit: unchanged
  CHECK(ps[1].grad.data[0] == 12.0);
  CHECK(clip_grad_norm(ps, 6.5) == 13.0);
  CHECK(ps[0].grad.data[0] == Approx(1.5));
  CHECK(ps[0].grad.data[1] == Approx(2.0));
  CHECK(ps[1].grad.data[0] == Approx(6.0));
  CHECK(clip_grad_norm(ps, 0.0) == Approx(6.5));
}

TEST_CASE("AdamW: one step matches the hand-computed update", "[optimizer]") {
  AdamWConfig cfg;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.95;
  cfg.eps = 1e-8;
  const double lr = 0.1;
  for (const double wd : {0.0, 0.01}) {
    cfg.weight_decay = wd;
    ParamStore<double> ps;
    Param<double>& w = ps.add("w", {2}, true);
    Param<double>& n = ps.add("n", {2}, false);  // never decayed
    w.value.data = {1.0, -2.0};
    n.value.data = {1.0, -2.0};
    w.grad.data = n.grad.data = {0.5, -1.0};
    AdamW<double> opt(cfg, ps);
    opt.step(ps, 0, lr);
    // Step 1: m = 0.1 g, v = 0.05 g^2, so m_hat = g and v_hat = g^2: the update is
    // g / (|g| + eps), plus the decoupled decay p * (1 - lr * wd) first.
    const double u0 = 0.5 / (0.5 + 1e-8), u1 = -1.0 / (1.0 + 1e-8);
    const double keep = 1.0 - lr * wd;
    CHECK(w.value.data[0] == Approx(1.0 * keep - lr * u0).epsilon(1e-14));
    CHECK(w.value.data[1] == Approx(-2.0 * keep - lr * u1).epsilon(1e-14));
    CHECK(n.value.data[0] == Approx(1.0 - lr * u0).epsilon(1e-14));
    CHECK(n.value.data[1] == Approx(-2.0 - lr * u1).epsilon(1e-14));
    CHECK(opt.m()[0].data[0] == Approx(0.05).epsilon(1e-14));
    CHECK(opt.v()[0].data[1] == Approx(0.05).epsilon(1e-14));

    // Step 2 with g = (1, 1): m = (0.145, 0.01), v = (0.061875, 0.0975).
    const double p0 = w.value.data[0], p1 = w.value.data[1];
    w.grad.data = {1.0, 1.0};
    opt.step(ps, 1, lr);
    const double bc1 = 1 - 0.81, bc2 = 1 - 0.9025;
    const double e0 = (0.145 / bc1) / (std::sqrt(0.061875 / bc2) + 1e-8);
    const double e1 = (0.01 / bc1) / (std::sqrt(0.0975 / bc2) + 1e-8);
    CHECK(w.value.data[0] == Approx(p0 * keep - lr * e0).epsilon(1e-13));
    CHECK(w.value.data[1] == Approx(p1 * keep - lr * e1).epsilon(1e-13));
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

// ---------------------------------------------------------------- checkpoint

namespace {

template <typename T>
void make_model(ParamStore<T>& ps, Shape embed_shape = {3, 4}) {
  ps.add("embed", embed_shape, true);
  ps.add("layers.0.norm", {4}, false);
}

// Parameters and non-zero moments from two seeded AdamW steps.
template <typename T>
void train_a_bit(ParamStore<T>& ps, AdamW<T>& opt, std::uint64_t seed) {
  Rng rng(seed);
  for (std::size_t i = 0; i < ps.size(); ++i)
    for (T& x : ps[i].value.data) x = T(rng.normal());
  for (int step = 0; step < 2; ++step) {
    for (std::size_t i = 0; i < ps.size(); ++i)
      for (T& g : ps[i].grad.data) g = T(rng.normal());
    opt.step(ps, step, 1e-2);
  }
}

template <typename T>
bool same_bits(const Tensor<T>& a, const Tensor<T>& b) {
  return a.shape == b.shape && a.data.size() == b.data.size() &&
         std::memcmp(a.ptr(), b.ptr(), a.data.size() * sizeof(T)) == 0;
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
  AdamWConfig cfg;
  cfg.weight_decay = 0.1;
  ParamStore<TestType> ps;
  make_model(ps);
  AdamW<TestType> opt(cfg, ps);
  train_a_bit(ps, opt, 11);

  TrainingState st;
  st.step = 3;
  st.rng_state = 0xFEDCBA9876543210ull;
  st.config_json = R"({"train": {"seed": 1}})";
  save_checkpoint(dir, st, ps, opt);
  CHECK(dir_listing(dir) == std::vector<std::string>{"ckpt-00000003.bin"});  // no .tmp left
  REQUIRE(latest_checkpoint(dir) == (fs::path(dir) / "ckpt-00000003.bin").string());

  ParamStore<TestType> ps2;
  make_model(ps2);
  AdamW<TestType> opt2(cfg, ps2);
  const TrainingState got = load_checkpoint(*latest_checkpoint(dir), ps2, opt2);
  CHECK(got.step == 3);
  CHECK(got.rng_state == st.rng_state);
  CHECK(got.config_json == st.config_json);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    CHECK(same_bits(ps[i].value, ps2[i].value));
    CHECK(same_bits(opt.m()[i], opt2.m()[i]));
    CHECK(same_bits(opt.v()[i], opt2.v()[i]));
  }
}

TEST_CASE("an f32 checkpoint loads into f64 parameters and back", "[checkpoint]") {
  TempDir tmp;
  AdamWConfig cfg;
  ParamStore<float> pf;
  make_model(pf);
  AdamW<float> of(cfg, pf);
  train_a_bit(pf, of, 5);
  save_checkpoint(tmp.dir.string(), TrainingState{7, 1, "{}"}, pf, of);

  ParamStore<double> pd;
  make_model(pd);
  AdamW<double> od(cfg, pd);
  CHECK(load_checkpoint(tmp / "ckpt-00000007.bin", pd, od).step == 7);
  for (std::size_t i = 0; i < pf.size(); ++i)
    for (std::size_t e = 0; e < pf[i].value.data.size(); ++e) {
      CHECK(pd[i].value.data[e] == double(pf[i].value.data[e]));
      CHECK(od.m()[i].data[e] == double(of.m()[i].data[e]));
      CHECK(od.v()[i].data[e] == double(of.v()[i].data[e]));
    }

  // And f64 into f32: values round to the nearest float.
  save_checkpoint(tmp.dir.string(), TrainingState{8, 1, "{}"}, pd, od);
  ParamStore<float> pf2;
  make_model(pf2);
  AdamW<float> of2(cfg, pf2);
  load_checkpoint(tmp / "ckpt-00000008.bin", pf2, of2);
  for (std::size_t i = 0; i < pf.size(); ++i) CHECK(same_bits(pf[i].value, pf2[i].value));
}

TEST_CASE("latest_checkpoint skips torn and corrupt files", "[checkpoint]") {
  TempDir tmp;
  const std::string dir = tmp.dir.string();
  CHECK_FALSE(latest_checkpoint(dir).has_value());
  CHECK_FALSE(latest_checkpoint(tmp / "missing").has_value());

  AdamWConfig cfg;
  ParamStore<float> ps;
  make_model(ps);
  AdamW<float> opt(cfg, ps);
  train_a_bit(ps, opt, 3);
  for (std::int64_t step : {3, 5, 7}) save_checkpoint(dir, TrainingState{step, 0, "{}"}, ps, opt);
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

  ParamStore<float> ps2;
  make_model(ps2);
  AdamW<float> opt2(cfg, ps2);
  CHECK_THROWS_WITH(load_checkpoint(p7, ps2, opt2), Contains(p7) && Contains("checksum"));
  CHECK_THROWS_WITH(load_checkpoint(p5, ps2, opt2), Contains(p5) && Contains("truncated"));
}

TEST_CASE("loading into a model of another shape names the parameter", "[checkpoint]") {
  TempDir tmp;
  AdamWConfig cfg;
  ParamStore<double> ps;
  make_model(ps);
  AdamW<double> opt(cfg, ps);
  train_a_bit(ps, opt, 9);
  save_checkpoint(tmp.dir.string(), TrainingState{1, 0, "{}"}, ps, opt);
  const std::string path = tmp / "ckpt-00000001.bin";

  ParamStore<double> other;
  make_model(other, {3, 5});
  AdamW<double> oo(cfg, other);
  CHECK_THROWS_WITH(load_checkpoint(path, other, oo), Contains(path) &&
                                                          Contains("parameter 'embed'") &&
                                                          Contains("[3, 4]") && Contains("[3, 5]"));
  // Nothing was written into the model.
  for (const double x : other[1].value.data) CHECK(x == 0.0);

  ParamStore<double> renamed;
  renamed.add("embedding", {3, 4}, true);
  renamed.add("layers.0.norm", {4}, false);
  AdamW<double> ro(cfg, renamed);
  CHECK_THROWS_WITH(load_checkpoint(path, renamed, ro),
                    Contains("'embed'") && Contains("'embedding'"));

  ParamStore<double> more;
  make_model(more);
  more.add("lm_head", {4, 3}, true);
  AdamW<double> mo(cfg, more);
  CHECK_THROWS_WITH(load_checkpoint(path, more, mo), Contains("lm_head"));
}
