#include "train/run_config.h"

#include "core/error.h"
#include "core/json_reader.h"
#include "cp/shard.h"

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
  GDN_CHECK(t.seq_len >= t.cp, "seq_len ", t.seq_len, t.origin("seq_len"), " is below cp ", t.cp,
            t.origin("cp"), ": every context-parallel rank needs at least one token");
  GDN_CHECK(m.linear_num_value_heads % m.linear_num_key_heads == 0,
            "model.linear_num_value_heads (Hv = ", m.linear_num_value_heads, ") in ", f,
            " is not a multiple of linear_num_key_heads (Hk = ", m.linear_num_key_heads,
            "): each key head serves Hv / Hk value heads");
  const int C = t.chunk_size;
  GDN_CHECK(C >= 16 && C <= 128 && (C & (C - 1)) == 0, "chunk_size ", C, t.origin("chunk_size"),
            ": expected a power of two in [16, 128] (16, 32, 64 or 128)");
  if (t.context_parallel_load_balance)
    require_contiguous_shards(LoadBalance::zigzag, "train.context_parallel_load_balance in " + f);
}

json to_json(const RunConfig& c) {
  return json{{"model", to_json(c.model)}, {"train", to_json(c.train)}};
}

}  // namespace gdn
