#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "cp/shard.h"

namespace gdn {
namespace {

using nlohmann::json;

// Levenshtein distance, for the did-you-mean of an unknown key.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Reads typed values out of one section ("model" or "train"), with messages that name the
// file, the key, the value and what was expected.
class Section {
 public:
  Section(const json& j, std::string name, std::string source)
      : j_(j), name_(std::move(name)), source_(std::move(source)) {}

  bool has(const std::string& key) const { return j_.contains(key); }

  [[noreturn]] void fail(const std::string& key, const std::string& expected) const {
    throw_error(name_, ".", key, " = ", j_.at(key).dump(), " in ", source_, ": expected ",
                expected);
  }

  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi) const {
    const json& v = j_.at(key);
    // Unsigned values above int64 max cannot be in any of our ranges.
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() &&
         v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())))
      fail(key, range_text(lo, hi));
    const auto x = v.get<std::int64_t>();
    if (x < lo || x > hi) fail(key, range_text(lo, hi));
    return x;
  }
  int int32(const std::string& key, int lo, int hi = std::numeric_limits<int>::max()) const {
    return int(integer(key, lo, hi));
  }
  std::uint64_t uint64(const std::string& key) const {
    const json& v = j_.at(key);
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    fail(key, "a non-negative integer");
  }
  double real(const std::string& key, double lo, bool lo_open) const {
    const json& v = j_.at(key);
    const std::string want = std::string("a number ") + (lo_open ? "> " : ">= ") + number_text(lo);
    if (!v.is_number()) fail(key, want);
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || (lo_open && x == lo)) fail(key, want);
    return x;
  }
  bool boolean(const std::string& key) const {
    const json& v = j_.at(key);
    if (!v.is_boolean()) fail(key, "true or false");
    return v.get<bool>();
  }
  std::string string(const std::string& key) const {
    const json& v = j_.at(key);
    if (!v.is_string()) fail(key, "a string");
    return v.get<std::string>();
  }

 private:
  static std::string number_text(double x) {
    std::ostringstream os;
    os << x;
    return os.str();
  }
  static std::string range_text(std::int64_t lo, std::int64_t hi) {
    std::ostringstream os;
    os << "an integer >= " << lo;
    if (hi != std::numeric_limits<std::int64_t>::max() && hi != std::numeric_limits<int>::max())
      os << " and <= " << hi;
    return os.str();
  }

  const json& j_;
  std::string name_, source_;
};

const std::vector<std::string> kRequiredModelKeys = {
    "vocab_size",          "hidden_size",           "num_hidden_layers",
    "intermediate_size",   "linear_num_key_heads",  "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim",
};
const std::vector<std::string> kOptionalModelKeys = {"linear_conv_kernel_dim", "rms_norm_eps",
                                                     "tie_word_embeddings", "initializer_range"};

const std::vector<std::string> kTrainKeys = {"seq_len",
                                             "batch_size",
                                             "steps",
                                             "lr",
                                             "warmup_steps",
                                             "weight_decay",
                                             "grad_clip",
                                             "seed",
                                             "dtype",
                                             "cp",
                                             "dp",
                                             "chunk_size",
                                             "context_parallel_load_balance",
                                             "data",
                                             "log",
                                             "checkpoint_dir",
                                             "checkpoint_every"};

ModelConfig parse_model(const json& j, const std::string& source,
                        std::vector<std::string>& ignored) {
  GDN_CHECK(j.is_object(), "\"model\" in ", source, " is ", j.type_name(),
            ": expected an object with the Hugging Face Qwen3NextConfig keys");
  for (const auto& key : kRequiredModelKeys)
    GDN_CHECK(j.contains(key), "model key '", key, "' is missing in ", source,
              " (required: ", join(kRequiredModelKeys), ")");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (std::find(kRequiredModelKeys.begin(), kRequiredModelKeys.end(), key) ==
            kRequiredModelKeys.end() &&
        std::find(kOptionalModelKeys.begin(), kOptionalModelKeys.end(), key) ==
            kOptionalModelKeys.end())
      ignored.push_back(key);
  }

  const Section s(j, "model", source);
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
  return m;
}

TrainConfig parse_train(const json& j, const std::string& source) {
  GDN_CHECK(j.is_object(), "\"train\" in ", source, " is ", j.type_name(), ": expected an object");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (std::find(kTrainKeys.begin(), kTrainKeys.end(), key) != kTrainKeys.end()) continue;
    std::string best;
    std::size_t best_d = std::string::npos;
    for (const auto& k : kTrainKeys) {
      const std::size_t d = edit_distance(key, k);
      if (d < best_d) best_d = d, best = k;
    }
    const bool close = best_d <= std::max<std::size_t>(2, key.size() / 3);
    throw_error("unknown train key '", key, "' in ", source,
                close ? " (did you mean '" + best + "'?)" : std::string(),
                " (known: ", join(kTrainKeys), ")");
  }

  const Section s(j, "train", source);
  TrainConfig t;
  const auto big = std::numeric_limits<std::int64_t>::max();
  const int big32 = std::numeric_limits<int>::max();
  if (s.has("seq_len")) t.seq_len = s.integer("seq_len", 1, big);
  if (s.has("batch_size")) t.batch_size = s.int32("batch_size", 1, big32);
  if (s.has("steps")) t.steps = s.int32("steps", 0, big32);
  if (s.has("lr")) t.lr = s.real("lr", 0.0, false);
  if (s.has("warmup_steps")) t.warmup_steps = s.int32("warmup_steps", 0, big32);
  if (s.has("weight_decay")) t.weight_decay = s.real("weight_decay", 0.0, false);
  if (s.has("grad_clip")) t.grad_clip = s.real("grad_clip", 0.0, false);
  if (s.has("seed")) t.seed = s.uint64("seed");
  if (s.has("dtype")) {
    t.dtype = s.string("dtype");
    if (t.dtype != "f32" && t.dtype != "f64") s.fail("dtype", "\"f32\" or \"f64\"");
  }
  if (s.has("cp")) t.cp = s.int32("cp", 1, big32);
  if (s.has("dp")) t.dp = s.int32("dp", 1, big32);
  if (s.has("chunk_size")) t.chunk_size = s.int32("chunk_size", 1, big32);
  if (s.has("context_parallel_load_balance"))
    t.context_parallel_load_balance = s.boolean("context_parallel_load_balance");
  if (s.has("data")) {
    t.data = s.string("data");
    if (t.data.empty()) s.fail("data", "\"synthetic\" or the path of a text file");
  }
  if (s.has("log")) t.log = s.string("log");
  if (s.has("checkpoint_dir")) t.checkpoint_dir = s.string("checkpoint_dir");
  if (s.has("checkpoint_every")) t.checkpoint_every = s.int32("checkpoint_every", 0, big32);
  return t;
}

bool is_power_of_two(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

}  // namespace

RunConfig parse_config(const json& j, const std::string& source) {
  GDN_CHECK(j.is_object(), source, " holds a JSON ", j.type_name(),
            ": expected an object {\"model\": {...}, \"train\": {...}}");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    // Comments ("_note", "description") are allowed; anything else is probably a typo.
    if (key == "model" || key == "train" || key == "description" || key == "comment" ||
        key.rfind('_', 0) == 0)
      continue;
    throw_error("unknown top-level key '", key, "' in ", source,
                ": expected \"model\" and \"train\" (and optionally \"description\")");
  }
  GDN_CHECK(j.contains("model"), source, " has no \"model\" object");
  GDN_CHECK(j.contains("train"), source, " has no \"train\" object");
  RunConfig c;
  c.source = source;
  c.model = parse_model(j.at("model"), source, c.ignored_model_keys);
  c.train = parse_train(j.at("train"), source);
  return c;
}

RunConfig load_config(const std::string& path) {
  std::ifstream in(path);
  GDN_CHECK(in.good(), "cannot open config file '", path,
            "': it does not exist or is not readable");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    // e.what() carries the byte position and what the parser expected.
    throw_error("config file '", path, "' is not valid JSON: ", e.what());
  }
  return parse_config(j, path);
}

void validate_layout(const RunConfig& c, int world_size) {
  const TrainConfig& t = c.train;
  const ModelConfig& m = c.model;
  const std::string& f = c.source;
  GDN_CHECK(std::int64_t(t.dp) * t.cp == world_size, "train.dp (", t.dp, ") x train.cp (", t.cp,
            ") = ", std::int64_t(t.dp) * t.cp, " ranks in ", f, ", but the job has world size ",
            world_size, ": launch with mpirun -np ", std::int64_t(t.dp) * t.cp,
            " (-np dp*cp), or set dp and cp so that dp*cp = ", world_size);
  // seq_len may be absent from the file and given by --seq-len, so it is checked here.
  GDN_CHECK(t.seq_len >= 1, "train.seq_len is not set in ", f,
            ": expected the tokens per sequence, an integer >= 1");
  GDN_CHECK(t.batch_size % t.dp == 0, "train.batch_size ", t.batch_size, " in ", f,
            " is not divisible by dp ", t.dp,
            ": every data-parallel group needs the same number of sequences");
  GDN_CHECK(t.seq_len >= t.cp, "seq_len ", t.seq_len, " is below cp ", t.cp, " in ", f,
            ": every context-parallel rank needs at least one token");
  GDN_CHECK(m.linear_num_value_heads % m.linear_num_key_heads == 0,
            "model.linear_num_value_heads (Hv = ", m.linear_num_value_heads, ") in ", f,
            " is not a multiple of linear_num_key_heads (Hk = ", m.linear_num_key_heads,
            "): each key head serves Hv / Hk value heads");
  GDN_CHECK(is_power_of_two(t.chunk_size) && t.chunk_size >= 16 && t.chunk_size <= 128,
            "train.chunk_size ", t.chunk_size, " in ", f,
            ": expected a power of two in [16, 128] (16, 32, 64 or 128)");
  if (t.context_parallel_load_balance)
    require_contiguous_shards(LoadBalance::zigzag, "train.context_parallel_load_balance in " + f);
}

nlohmann::json to_json(const RunConfig& c) {
  const ModelConfig& m = c.model;
  const TrainConfig& t = c.train;
  return json{{"model",
               {{"vocab_size", m.vocab_size},
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
                {"initializer_range", m.initializer_range}}},
              {"train",
               {{"seq_len", t.seq_len},
                {"batch_size", t.batch_size},
                {"steps", t.steps},
                {"lr", t.lr},
                {"warmup_steps", t.warmup_steps},
                {"weight_decay", t.weight_decay},
                {"grad_clip", t.grad_clip},
                {"seed", t.seed},
                {"dtype", t.dtype},
                {"cp", t.cp},
                {"dp", t.dp},
                {"chunk_size", t.chunk_size},
                {"context_parallel_load_balance", t.context_parallel_load_balance},
                {"data", t.data},
                {"log", t.log},
                {"checkpoint_dir", t.checkpoint_dir},
                {"checkpoint_every", t.checkpoint_every}}}};
}

}  // namespace gdn
