#include "train/train_config.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/json_reader.h"

namespace gdn {

namespace {

using nlohmann::json;
using T = TrainConfig;

constexpr double kNoUpper = 0;

// The names a string or enum field accepts: its choices, or for an enum without them, every
// name of the enum.
template <typename V>
std::vector<std::string> allowed_names(const TrainField& f) {
  if constexpr (std::is_enum_v<V>) {
    if (f.choices.empty()) {
      const auto names = enum_names(V{});
      return {names.begin(), names.end()};
    }
  }
  return f.choices;
}

std::string what_is_expected(const TrainField& f) {
  return std::visit(
      [&](auto member) -> std::string {
        using V = std::remove_reference_t<decltype(std::declval<T>().*member)>;
        if constexpr (std::is_same_v<V, bool>) {
          return "true or false";
        } else if constexpr (std::is_same_v<V, std::string> || std::is_enum_v<V>) {
          const std::vector<std::string> names = allowed_names<V>(f);
          if (!names.empty()) {
            std::string s;
            for (const auto& c : names) s += (s.empty() ? "" : " or ") + ("\"" + c + "\"");
            return s;
          }
          return f.nonempty ? "a non-empty string" : "a string";
        } else if constexpr (std::is_same_v<V, std::uint64_t>) {
          return "a non-negative integer";
        } else if constexpr (std::is_integral_v<V>) {
          return integer_range_text(
              std::int64_t(f.lo),
              f.hi == kNoUpper ? std::numeric_limits<std::int64_t>::max() : std::int64_t(f.hi));
        } else {
          std::string s = real_range_text(f.lo, f.lo_open);
          if (f.hi != kNoUpper) s += " and <= " + std::to_string(f.hi);
          return s;
        }
      },
      f.member);
}

// A value, parsed from JSON or from a flag's text, before the range check.
using Value = std::variant<std::int64_t, std::uint64_t, double, bool, std::string>;

// nullopt when the JSON value has the wrong type.
std::optional<Value> from_json(const TrainField& f, const json& v) {
  return std::visit(
      [&](auto member) -> std::optional<Value> {
        using V = std::remove_reference_t<decltype(std::declval<T>().*member)>;
        if constexpr (std::is_same_v<V, bool>) {
          if (v.is_boolean()) return Value(v.get<bool>());
        } else if constexpr (std::is_same_v<V, std::string> || std::is_enum_v<V>) {
          if (v.is_string()) return Value(v.get<std::string>());
        } else if constexpr (std::is_same_v<V, std::uint64_t>) {
          if (v.is_number_unsigned()) return Value(v.get<std::uint64_t>());
        } else if constexpr (std::is_integral_v<V>) {
          if (v.is_number_unsigned() &&
              v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
            return std::nullopt;
          if (v.is_number_integer()) return Value(v.get<std::int64_t>());
          if (v.is_number_float())
            if (const std::optional<std::int64_t> w = whole_number(v.get<double>()))
              return Value(*w);
        } else {
          if (v.is_number()) return Value(v.get<double>());
        }
        return std::nullopt;
      },
      f.member);
}

// nullopt when the text is not a value of the field's type.
std::optional<Value> from_text(const TrainField& f, const std::string& s) {
  return std::visit(
      [&](auto member) -> std::optional<Value> {
        using V = std::remove_reference_t<decltype(std::declval<T>().*member)>;
        if constexpr (std::is_same_v<V, bool>) {
          if (s == "true" || s == "1") return Value(true);
          if (s == "false" || s == "0") return Value(false);
        } else if constexpr (std::is_same_v<V, std::string> || std::is_enum_v<V>) {
          return Value(s);
        } else if constexpr (std::is_integral_v<V>) {
          using I =
              std::conditional_t<std::is_same_v<V, std::uint64_t>, std::uint64_t, std::int64_t>;
          I x{};
          const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
          if (!s.empty() && ec == std::errc() && end == s.data() + s.size()) return Value(x);
          // "1.0", "1e3": a whole number written as a decimal is that integer.
          const std::optional<double> d = parse_decimal(s);
          const std::optional<std::int64_t> w = d ? whole_number(*d) : std::nullopt;
          if (w && (std::is_signed_v<I> || *w >= 0)) return Value(I(*w));
        } else {
          if (const std::optional<double> x = parse_decimal(s)) return Value(*x);
        }
        return std::nullopt;
      },
      f.member);
}

// Range and choice checks, then the assignment; false when the value is out of range.
bool assign(T& t, const TrainField& f, const Value& value) {
  return std::visit(
      [&](auto member) -> bool {
        using V = std::remove_reference_t<decltype(t.*member)>;
        if constexpr (std::is_enum_v<V>) {
          const std::string& x = std::get<std::string>(value);
          const std::vector<std::string> names = allowed_names<V>(f);
          const std::optional<V> e = enum_from_name<V>(x);
          if (!e || std::find(names.begin(), names.end(), x) == names.end()) return false;
          t.*member = *e;
          return true;
        } else if constexpr (std::is_same_v<V, bool> || std::is_same_v<V, std::string> ||
                             std::is_same_v<V, std::uint64_t>) {
          const V& x = std::get<V>(value);
          if constexpr (std::is_same_v<V, std::string>) {
            if (f.nonempty && x.empty()) return false;
            if (!f.choices.empty() &&
                std::find(f.choices.begin(), f.choices.end(), x) == f.choices.end())
              return false;
          }
          t.*member = x;
          return true;
        } else if constexpr (std::is_integral_v<V>) {
          const std::int64_t x = std::get<std::int64_t>(value);
          const std::int64_t hi =
              f.hi == kNoUpper ? std::numeric_limits<V>::max() : std::int64_t(f.hi);
          if (x < std::int64_t(f.lo) || x > hi) return false;
          t.*member = V(x);
          return true;
        } else {
          const double x = std::get<double>(value);
          if (!std::isfinite(x) || x < f.lo || (f.lo_open && x == f.lo) ||
              (f.hi != kNoUpper && x > f.hi))
            return false;
          t.*member = x;
          return true;
        }
      },
      f.member);
}

json member_json(const T& t, const TrainField& f) {
  return std::visit(
      [&](auto member) {
        using V = std::remove_reference_t<decltype(t.*member)>;
        if constexpr (std::is_enum_v<V>)
          return json(name_of(t.*member));
        else
          return json(t.*member);
      },
      f.member);
}

}  // namespace

std::string TrainConfig::origin(const std::string& key) const {
  const auto it = set_by.find(key);
  return it == set_by.end() ? std::string() : " (" + it->second + ")";
}

const std::vector<TrainField>& train_fields() {
  static const std::vector<TrainField> fields = {
      {.key = "seq_len",
       .flag = "seq-len",
       .help = "tokens per sequence (split over the cp ranks)",
       .member = &T::seq_len,
       .lo = 1},
      {.key = "batch_size",
       .flag = "batch",
       .help = "sequences per step over all dp groups (a multiple of dp)",
       .member = &T::batch_size,
       .lo = 1},
      {.key = "steps",
       .flag = "steps",
       .help = "optimizer steps to run in total (a resumed run stops there too)",
       .member = &T::steps},
      {.key = "grad_accum",
       .flag = "grad-accum",
       .help = "gradient accumulation: each dp group runs its batch_size / dp sequences as N "
               "micro-batches one after another, their gradients summed, so a step holds one "
               "micro-batch's activations; the step's sequences, loss and update are those of "
               "N = 1 (to rounding)",
       .member = &T::grad_accum,
       .lo = 1},
      {.key = "lr", .flag = "lr", .help = "peak learning rate (AdamW)", .member = &T::lr},
      {.key = "warmup_steps",
       .flag = "warmup-steps",
       .help = "linear warmup steps, then the lr schedule",
       .member = &T::warmup_steps},
      {.key = "lr_schedule",
       .flag = "lr-schedule",
       .help = "cosine | linear | constant | wsd: the lr after warmup: cosine or linear decay "
               "to min_lr at the last step, constant, or warmup-stable-decay (constant, then "
               "linear to min_lr over the last decay_fraction of the steps)",
       .member = &T::lr_schedule},
      {.key = "min_lr",
       .flag = "min-lr",
       .help = "the lr the decay ends at (<= lr); -1, the default: lr / 10",
       .member = &T::min_lr,
       .lo = -1},
      {.key = "decay_fraction",
       .flag = "decay-fraction",
       .help = "wsd: the share of the steps (after warmup) that decays to min_lr",
       .member = &T::decay_fraction,
       .lo = 0,
       .hi = 1,
       .lo_open = true},
      {.key = "weight_decay",
       .flag = "weight-decay",
       .help = "decoupled AdamW weight decay (matrices only)",
       .member = &T::weight_decay},
      {.key = "grad_clip",
       .flag = "grad-clip",
       .help = "clip the global gradient norm to this (0: no clipping)",
       .member = &T::grad_clip},
      {.key = "seed",
       .flag = "seed",
       .help = "seed of the initial weights and the data: same seed, same run",
       .member = &T::seed},
      {.key = "dtype",
       .flag = "dtype",
       .help = "f32, f64, or bf16: mixed precision (f32 weights, moments and gradients; "
               "matmuls on bf16 operands with f32 sums; the GDN op's and attention's inputs "
               "and outputs stored as bf16 values; docs/usage.md)",
       .member = &T::dtype,
       .choices = {"f32", "f64", "bf16"}},
      {.key = "cp",
       .flag = "cp",
       .help = "context-parallel degree: ranks sharing each sequence",
       .member = &T::cp,
       .lo = 1},
      {.key = "dp",
       .flag = "dp",
       .help = "data-parallel degree: groups of ranks with different sequences",
       .member = &T::dp,
       .lo = 1},
      {.key = "ep",
       .flag = "ep",
       .help = "expert-parallel degree: the experts of every MoE layer split over groups of ep "
               "consecutive ranks of the dp x cp mesh, the routed tokens moved to their expert's "
               "rank and back by all-to-all (divides the world and num_experts)",
       .member = &T::ep,
       .lo = 1},
      {.key = "chunk_size",
       .flag = "chunk-size",
       .help = "tokens per chunk of the GDN core: 16, 32, 64 or 128",
       .member = &T::chunk_size,
       .lo = 1},
      {.key = "context_parallel_load_balance",
       .flag = "",
       .help = "MaxText's name for zigzag load balancing: refused (see --load-balance)",
       .member = &T::context_parallel_load_balance},
      {.key = "attention_load_balance",
       .flag = "attention-load-balance",
       .help = "none | layer_local: inside the full-attention layers only, give every cp rank an "
               "equal share of the causal triangle (stripes r and 2P - 1 - r, and back); GDN "
               "layers keep their contiguous shards",
       .member = &T::attention_load_balance},
      {.key = "pair_scan",
       .flag = "pair-scan",
       .help = "allgather | log_depth | auto: how GDN layers find their entry states across the "
               "cp group: all-gather every rank's (M, U) and keep them for the backward (P pairs "
               "per layer), or a Hillis-Steele scan over point-to-point messages in ceil(log2 P) "
               "rounds keeping this rank's M only; auto takes the faster on one node's link "
               "(2 us, 100 GB/s), or log_depth when only it fits the memory (gdn_plan says why)",
       .member = &T::pair_scan},
      {.key = "recompute",
       .flag = "recompute",
       .help = "none | layer: keep only each layer's input from the forward and run the layer "
               "again before its backward (less memory, one more forward; the same bits)",
       .member = &T::recompute},
      {.key = "shard",
       .flag = "shard",
       .help = "none | optimizer | full: shard the training state over every rank (dp x cp): "
               "optimizer keeps 1/world of the AdamW moments and update per rank (gradients "
               "reduce-scattered, values all-gathered); full shards the parameters too, "
               "gathering each layer's just before its forward and its backward",
       .member = &T::shard},
      {.key = "data",
       .flag = "data",
       .help = "'synthetic' (seeded Markov chain), a token file (*.u16 / *.u32: raw "
               "little-endian uint16 / uint32 ids; *.npy: 1-D int32 or int64 ids) or any other "
               "file as text (byte-level tokens)",
       .member = &T::data,
       .choices = {},
       .nonempty = true},
      {.key = "documents",
       .flag = "documents",
       .help = "none | eos: with eos, a window holds packed documents, each one an independent "
               "sequence (the GDN state resets, the conv and attention do not look back across "
               "a boundary, RoPE positions restart at 0, and the token after a document's last "
               "one is not a target); documents end after model.eos_token_id, or where the "
               "index of a Megatron .bin/.idx dataset says",
       .member = &T::documents},
      {.key = "eval_data",
       .flag = "eval-data",
       .help = "validation data: a text, token or Megatron file (any format train.data "
               "reads but synthetic and blends), cut into consecutive windows of seq_len + 1 "
               "tokens overlapping by one; the first eval_sequences of them are evaluated "
               "(forward only, documents as in training) every eval_every steps and after "
               "the last; \"\" (the default): none",
       .member = &T::eval_data},
      {.key = "eval_every",
       .flag = "eval-every",
       .help = "validate every N steps (0: only after the last step)",
       .member = &T::eval_every},
      {.key = "eval_sequences",
       .flag = "eval-sequences",
       .help = "the validation windows K: the first K of eval_data",
       .member = &T::eval_sequences,
       .lo = 1},
      {.key = "log",
       .flag = "log",
       .help = "append one JSON line per step to this file (and one per validation)",
       .member = &T::log},
      {.key = "checkpoint_dir",
       .flag = "checkpoint-dir",
       .help = "directory for checkpoints (written atomically by rank 0)",
       .member = &T::checkpoint_dir},
      {.key = "checkpoint_every",
       .flag = "checkpoint-every",
       .help = "save every N steps (0: only at the end)",
       .member = &T::checkpoint_every},
      {.key = "keep_checkpoints",
       .flag = "keep-checkpoints",
       .help = "keep the newest N complete checkpoints, delete older ones (0: keep all)",
       .member = &T::keep_checkpoints},
      {.key = "watchdog_s",
       .flag = "watchdog-s",
       .help =
           "end the job when a rank makes no progress for this many seconds, naming the rank and "
           "step (0: off); must exceed the slowest step and checkpoint write",
       .member = &T::watchdog_s},
      {.key = "profile",
       .flag = "profile",
       .help = "time every step by component (GEMMs by layer kind, the GDN and attention "
               "cores, MoE routing and dispatch, the rest of each layer, the optimizer, each "
               "communication site): a table after step 3 and at the end, and a \"profile\" "
               "object (ms) in each line of the log",
       .member = &T::profile},
      {.key = "gemm_path",
       .flag = "gemm-path",
       .help = "auto | generic | avx2 | avx512 | avx512_bf16: the host GEMM kernels (auto: the "
               "widest this CPU runs; another one it runs, to compare them); replaces the "
               "environment variable GDN_GEMM_PATH",
       .member = &T::gemm_path,
       .choices = {"auto", "generic", "avx2", "avx512", "avx512_bf16"}},
      {.key = "cuda_walk",
       .flag = "cuda-walk",
       .help = "auto | tiled: on CUDA in the bf16 mode, the GDN walks as register kernels where "
               "they run (auto) or always as the tiled CudaExec kernels; replaces GDN_CUDA_WALK",
       .member = &T::cuda_walk},
      {.key = "cuda_tf32",
       .flag = "cuda-tf32",
       .help = "on CUDA, the fp32 GDN chunk GEMMs on TF32 tensor cores (about 1e-3 relative "
               "instead of 1e-6); replaces GDN_CUDA_TF32=1",
       .member = &T::cuda_tf32},
      {.key = "attention_backend",
       .flag = "attention-backend",
       .help = "auto | cudnn | flash | exact: the CUDA attention kernels: in the bf16 mode "
               "cuDNN's fused attention where the build has it and cuDNN takes the shape, "
               "else the flash kernels, and the exact (fp64-accumulating) ones otherwise "
               "(auto); or cudnn (flash where cuDNN refuses), flash or exact in either mode",
       .member = &T::attention_backend},
  };
  return fields;
}

const TrainField* find_train_field(const std::string& key) {
  for (const TrainField& f : train_fields())
    if (key == f.key) return &f;
  return nullptr;
}

void set_train_field(TrainConfig& t, const TrainField& f, const json& value,
                     const std::string& source) {
  const std::optional<Value> v = from_json(f, value);
  if (!v || !assign(t, f, *v))
    throw_error("train.", f.key, " = ", value.dump(), " in ", source, ": expected ",
                what_is_expected(f));
  t.set_by[f.key] = "train." + std::string(f.key) + " in " + source;
}

void set_train_field_text(TrainConfig& t, const TrainField& f, const std::string& text) {
  const std::string flag = std::string("--") + f.flag;
  const std::optional<Value> v = from_text(f, text);
  if (!v || !assign(t, f, *v))
    throw_error(flag, " ", text.empty() ? "''" : text, ": expected ", what_is_expected(f),
                " (the flag of train.", f.key, ")");
  t.set_by[f.key] = flag;
}

TrainConfig parse_train_config(const json& j, const std::string& source) {
  GDN_CHECK(j.is_object(), "\"train\" in ", source, " is ", j.type_name(), ": expected an object");
  std::vector<std::string> known;
  for (const TrainField& f : train_fields()) known.emplace_back(f.key);
  TrainConfig t;
  for (const auto& [key, value] : j.items()) {
    const TrainField* f = find_train_field(key);
    if (!f) {
      std::string keys;
      for (const auto& k : known) keys += (keys.empty() ? "" : ", ") + k;
      const std::string best = closest_key(key, known);
      throw_error("unknown train key '", key, "' in ", source,
                  best.empty() ? std::string() : " (did you mean '" + best + "'?)",
                  " (known: ", keys, ")");
    }
    set_train_field(t, *f, value, source);
  }
  return t;
}

json to_json(const TrainConfig& t) {
  json j = json::object();
  for (const TrainField& f : train_fields()) j[f.key] = member_json(t, f);
  return j;
}

}  // namespace gdn
