#include "train/run_config.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "core/checked_int.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "cp/shard.h"
#include "train/data.h"

namespace gdn {

using nlohmann::json;

RunConfig parse_config(const json& j, const std::string& source, const json& train,
                       const std::string& train_source) {
  GDN_CHECK(j.is_object(), source, " holds a JSON ", j.type_name(),
            ": expected an object {\"model\": {...}, \"train\": {...}} or a Hugging Face "
            "config.json");
  RunConfig c;
  c.source = source;
  // The train object from the train file: {"train": {...}} or the bare object.
  const json* t = nullptr;
  std::string t_source = source;
  if (!train.is_null()) {
    GDN_CHECK(train.is_object(), train_source, " holds a JSON ", train.type_name(),
              ": expected the train settings, {\"train\": {...}} or {...}");
    t = train.contains("train") ? &train.at("train") : &train;
    t_source = train_source;
  }
  static const json kEmpty = json::object();
  if (j.contains("model_type")) {
    // A bare Hugging Face config: all of it describes the model.
    c.model = parse_model_config(j, source, c.ignored_model_keys, c.model_notes);
    c.train = parse_train_config(t ? *t : kEmpty, t ? t_source : source);
    return c;
  }
  for (const auto& [key, value] : j.items()) {
    (void)value;
    // Comments ("_note", "description") are allowed; anything else is probably a typo.
    if (key == "model" || key == "train" || key == "description" || key == "comment" ||
        key.rfind('_', 0) == 0)
      continue;
    throw_error("unknown top-level key '", key, "' in ", source,
                ": expected \"model\" and \"train\" (and optionally \"description\"), or a "
                "Hugging Face config.json with \"model_type\"");
  }
  GDN_CHECK(j.contains("model"), source, " has no \"model\" object");
  GDN_CHECK(!t || !j.contains("train"), source, " has a \"train\" object and ", train_source,
            " gives the train settings too: keep one of them");
  GDN_CHECK(t || j.contains("train"), source,
            " has no \"train\" object (or give the train settings with --train-config FILE)");
  c.model = parse_model_config(j.at("model"), source, c.ignored_model_keys, c.model_notes);
  c.train = parse_train_config(t ? *t : j.at("train"), t_source);
  return c;
}

RunConfig load_config(const std::string& path, const std::string& train_path) {
  return parse_config(read_json_file(path), path,
                      train_path.empty() ? json() : read_json_file(train_path), train_path);
}

namespace {

// The widest per-token row a step forms (logits, projections, MLP and router outputs):
// with seq_len and batch_size, it bounds the elements of every activation.
std::pair<std::int64_t, const char*> widest_row(const ModelConfig& m) {
  using I = std::int64_t;
  const bool attention = m.num_attention_layers() > 0, moe = m.num_moe_layers() > 0,
             dense = m.num_moe_layers() < m.num_hidden_layers;
  const std::pair<I, const char*> rows[] = {
      {m.vocab_size, "vocab_size"},
      {m.hidden_size, "hidden_size"},
      {dense ? I(m.intermediate_size) * 2 : 0, "2 intermediate_size"},
      {2 * I(m.linear_num_key_heads) * m.linear_key_head_dim +
           2 * I(m.linear_num_value_heads) * m.linear_value_head_dim,
       "the GDN projections"},
      {attention ? (2 * I(m.num_attention_heads) + 2 * I(m.num_key_value_heads)) * m.head_dim : 0,
       "the attention projections"},
      {moe ? I(m.num_experts) : 0, "num_experts"},
      {moe ? 2 * I(m.num_experts_per_tok) * m.moe_intermediate_size : 0, "the routed experts"},
      {moe ? 2 * I(m.shared_expert_intermediate_size) : 0, "the shared expert"}};
  std::pair<I, const char*> best = rows[0];
  for (const auto& r : rows)
    if (r.first > best.first) best = r;
  return best;
}

// "" when every size a step of B sequences of T tokens forms fits in 64 bits, else the
// product that does not. gdn_plan also plans cp = 1, so whole sequences are counted, and
// bytes as f64's 8, so that the limit does not depend on the dtype.
std::string step_size_overflow(const ModelConfig& m, std::int64_t T, std::int64_t B) {
  const std::optional<std::int64_t> T1 = checked_add(T, 1);
  if (!T1 || !checked_mul(B, *T1)) return "batch_size x (seq_len + 1) tokens";
  const auto [W, what] = widest_row(m);
  if (!checked_product({B, T, W, 8}))
    return "batch_size x seq_len x " + std::to_string(W) + " values (" + what + ") x 8 bytes";
  if (m.num_attention_layers() > 0) {
    const std::optional<std::int64_t> tri = checked_mul(T, *T1);
    if (!tri || !checked_product({B, *tri / 2, m.num_attention_heads, m.num_attention_layers()}))
      return "batch_size x seq_len (seq_len + 1) / 2 (query, key) pairs x " +
             std::to_string(m.num_attention_heads) + " heads x " +
             std::to_string(m.num_attention_layers()) + " attention layers";
  }
  return "";
}

// "--seq-len 9" or "train.seq_len = 9 in FILE": where a value came from, for messages.
std::string named(const TrainConfig& t, const std::string& key, std::int64_t value) {
  const auto it = t.set_by.find(key);
  const std::string v = std::to_string(value);
  if (it == t.set_by.end()) return "train." + key + " = " + v + " (the default)";
  if (it->second.rfind("--", 0) == 0) return it->second + " " + v;
  const std::string pre = "train." + key;  // "train.key in FILE"
  return pre + " = " + v + it->second.substr(std::min(pre.size(), it->second.size()));
}

// The largest x in [1, hi] with fits(x) (fits(1) holds, fits(hi) does not).
template <typename F>
std::int64_t largest_fitting(std::int64_t hi, const F& fits) {
  std::int64_t lo = 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

// Refuses a seq_len or batch_size whose step sizes overflow, naming the flag or key: the
// seq_len when it is too long even for one sequence, else the batch_size.
void check_step_sizes(const RunConfig& c) {
  const TrainConfig& t = c.train;
  if (step_size_overflow(c.model, t.seq_len, t.batch_size).empty()) return;
  const auto fits = [&](std::int64_t T, std::int64_t B) {
    return step_size_overflow(c.model, T, B).empty();
  };
  const std::string one = step_size_overflow(c.model, t.seq_len, 1);
  if (!one.empty())
    throw_error(named(t, "seq_len", t.seq_len), ": ", one,
                " overflows a 64-bit size even at batch_size 1; the largest seq_len whose sizes "
                "fit is ",
                largest_fitting(t.seq_len, [&](std::int64_t T) { return fits(T, 1); }));
  throw_error(named(t, "batch_size", t.batch_size), ": ",
              step_size_overflow(c.model, t.seq_len, t.batch_size),
              " overflows a 64-bit size at seq_len ", t.seq_len,
              "; the largest batch_size whose sizes fit is ",
              largest_fitting(t.batch_size, [&](std::int64_t B) { return fits(t.seq_len, B); }));
}

}  // namespace

void validate_layout(const RunConfig& c, int world_size) {
  const TrainConfig& t = c.train;
  const ModelConfig& m = c.model;
  const std::string& f = c.source;
  const std::int64_t ranks = std::int64_t(t.dp) * t.cp;
  GDN_CHECK(ranks == world_size, "dp ", t.dp, t.origin("dp"), " x cp ", t.cp, t.origin("cp"), " = ",
            ranks, " ranks, but the job has world size ", world_size, ": launch with mpirun -np ",
            ranks, " (-np dp*cp), or set dp and cp so that dp*cp = ", world_size);
  // seq_len may be absent from the file and given by --seq-len, so it is checked here.
  GDN_CHECK(t.seq_len >= 1, "train.seq_len is not set in ", f,
            ": expected the tokens per sequence, an integer >= 1 (or --seq-len)");
  GDN_CHECK(t.batch_size % t.dp == 0, "batch_size ", t.batch_size, t.origin("batch_size"),
            " is not divisible by dp ", t.dp, t.origin("dp"),
            ": every data-parallel group needs the same number of sequences");
  GDN_CHECK(t.batch_size / t.dp % t.grad_accum == 0, "grad_accum ", t.grad_accum,
            t.origin("grad_accum"), " does not divide the ", t.batch_size / t.dp,
            " sequences of each dp group (batch_size ", t.batch_size, t.origin("batch_size"),
            " / dp ", t.dp, "): every micro-batch needs the same number of sequences");
  GDN_CHECK(t.seq_len >= t.cp, "seq_len ", t.seq_len, t.origin("seq_len"), " is below cp ", t.cp,
            t.origin("cp"), ": every context-parallel rank needs at least one token");
  GDN_CHECK(m.linear_num_value_heads % m.linear_num_key_heads == 0,
            "model.linear_num_value_heads (Hv = ", m.linear_num_value_heads, ") in ", f,
            " is not a multiple of linear_num_key_heads (Hk = ", m.linear_num_key_heads,
            "): each key head serves Hv / Hk value heads");
  if (t.ep > 1) {
    GDN_CHECK(m.num_moe_layers() > 0, "ep ", t.ep, t.origin("ep"),
              ": expert parallelism needs MoE layers, and the model in ", f,
              " has none (num_experts ", m.num_experts, "); use ep 1");
    GDN_CHECK(m.num_experts % t.ep == 0, "ep ", t.ep, t.origin("ep"), " does not divide the ",
              m.num_experts, " experts (model.num_experts in ", f,
              "): every ep rank holds the same number of experts");
    GDN_CHECK(world_size % t.ep == 0, "ep ", t.ep, t.origin("ep"),
              " does not divide the world of dp x cp = ", world_size,
              " ranks: the ep groups are ep consecutive ranks of the mesh");
  }
  GDN_CHECK(t.min_lr <= t.lr, "min_lr ", t.min_lr, t.origin("min_lr"), " is above lr ", t.lr,
            t.origin("lr"), ": the schedule decays from lr to min_lr");
  const int C = t.chunk_size;
  GDN_CHECK(C >= 16 && C <= 128 && (C & (C - 1)) == 0, "chunk_size ", C, t.origin("chunk_size"),
            ": expected a power of two in [16, 128] (16, 32, 64 or 128)");
  check_step_sizes(c);
  GDN_CHECK(t.documents == DocumentSplit::none || m.eos_token_id >= 0 || is_indexed_dataset(t.data),
            "train.documents is eos", t.origin("documents"),
            " but model.eos_token_id is not set in ", f,
            ": expected the token id that ends each document (the tokenizer's EOS), or data from "
            "a Megatron .bin/.idx dataset, whose index says where documents start");
  if (t.context_parallel_load_balance)
    require_contiguous_shards(LoadBalance::zigzag, "train.context_parallel_load_balance in " + f);
}

json to_json(const RunConfig& c) {
  return json{{"model", to_json(c.model)}, {"train", to_json(c.train)}};
}

}  // namespace gdn
