#include "model/hf_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/safetensors.h"

namespace gdn {

namespace {

using i64 = std::int64_t;
constexpr const char* kLmHead = "lm_head.weight";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The checkpoint name of a text-model parameter ("model.layers.0..." ->
// "model.language_model.layers.0...").
std::string hf_name(const ModelConfig& c, const std::string& param) {
  if (c.multimodal && param.rfind("model.", 0) == 0)
    return "model.language_model." + param.substr(6);
  return param;
}

const ParamInfo& find(const std::vector<ParamInfo>& params, const std::string& name) {
  for (const ParamInfo& p : params)
    if (p.name == name) return p;
  throw_error("hf_tensor_maps: no parameter '", name, "'");
}

// Appends one segment per row block, merging blocks that continue the previous one.
void add_rows(HfTensorMap& m, i64& hf, i64 param_offset, i64 rows, i64 row_len) {
  const i64 len = rows * row_len;
  if (len == 0) return;
  if (!m.runs.empty()) {
    HfRun& last = m.runs.back();
    if (last.hf + last.len == hf && last.param + last.len == param_offset) {
      last.len += len;
      hf += len;
      return;
    }
  }
  m.runs.push_back({hf, param_offset, len});
  hf += len;
}

HfTensorMap whole(const std::string& name, const ParamInfo& p, Shape shape) {
  HfTensorMap m{name, std::move(shape), {}};
  i64 hf = 0;
  add_rows(m, hf, p.offset, 1, p.size);
  return m;
}

// Qwen3-Next's in_proj_qkvz and in_proj_ba from the four Qwen3.5-style projections.
void add_qwen3_next_projections(const ModelConfig& c, const std::vector<ParamInfo>& params,
                                const std::string& base, std::vector<HfTensorMap>& out) {
  const i64 d = c.hidden_size, Hk = c.linear_num_key_heads, K = c.linear_key_head_dim;
  const i64 G = c.linear_num_value_heads / Hk, V = c.linear_value_head_dim, qk = Hk * K;
  const ParamInfo& qkv = find(params, base + "in_proj_qkv.weight");
  const ParamInfo& z = find(params, base + "in_proj_z.weight");
  const ParamInfo& b = find(params, base + "in_proj_b.weight");
  const ParamInfo& a = find(params, base + "in_proj_a.weight");
  HfTensorMap qkvz{hf_name(c, base + "in_proj_qkvz.weight"), {2 * qk + 2 * Hk * G * V, d}, {}};
  HfTensorMap ba{hf_name(c, base + "in_proj_ba.weight"), {2 * Hk * G, d}, {}};
  i64 at = 0, at_ba = 0;
  for (i64 g = 0; g < Hk; ++g) {
    add_rows(qkvz, at, qkv.offset + g * K * d, K, d);                     // q_g
    add_rows(qkvz, at, qkv.offset + (qk + g * K) * d, K, d);              // k_g
    add_rows(qkvz, at, qkv.offset + (2 * qk + g * G * V) * d, G * V, d);  // v_g
    add_rows(qkvz, at, z.offset + g * G * V * d, G * V, d);               // z_g
    add_rows(ba, at_ba, b.offset + g * G * d, G, d);
    add_rows(ba, at_ba, a.offset + g * G * d, G, d);
  }
  out.push_back(std::move(qkvz));
  out.push_back(std::move(ba));
}

// Element i of a row-major tensor as "[a, b, c]".
std::string index_str(const Shape& shape, i64 i) {
  std::vector<i64> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] > 0 ? i % shape[d] : 0;
    i = shape[d] > 0 ? i / shape[d] : 0;
  }
  std::string s = "[";
  for (std::size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

// A NaN or Inf weight makes every loss NaN (gdn_eval would print null): refused at load,
// naming the tensor and its first bad element.
// values: elements [first, first + n) of the tensor.
template <typename T>
void require_finite(const std::string& dir, const SafetensorsDir& ckpt, const std::string& name,
                    const T* values, i64 n, i64 first) {
  const T* bad = std::find_if(values, values + n, [](T x) { return !std::isfinite(x); });
  if (bad == values + n) return;
  const i64 i = first + (bad - values);
  const TensorInfo& info = ckpt.info(name);
  std::string why;
  if (info.dtype == SafetensorsDtype::F64 && sizeof(T) < 8) {
    double stored;
    std::memcpy(&stored, ckpt.file_of(name).raw(name).data() + 8 * i, 8);
    if (std::isfinite(stored)) {
      std::ostringstream os;
      os << " (the stored F64 value " << stored << " is beyond the f32 range)";
      why = os.str();
    }
  }
  throw_error("checkpoint ", dir, ": tensor '", name, "' (", safetensors_dtype_name(info.dtype),
              " ", shape_str(info.shape), ") holds ", *bad, " at element ", i, " (index ",
              index_str(info.shape, i), ")", why,
              ": non-finite weights make every loss NaN; refusing to load them");
}

// Whether two tensors hold the same values, as torch.equal compares them (+0 equals -0).
// Of one dtype they are compared in place, so no large tensor is converted.
bool same_values(const SafetensorsDir& ckpt, const std::string& a, const std::string& b) {
  const TensorInfo &ia = ckpt.info(a), &ib = ckpt.info(b);
  if (ia.shape != ib.shape) return false;
  if (ia.dtype != ib.dtype) return ckpt.read<double>(a) == ckpt.read<double>(b);
  const auto ra = ckpt.file_of(a).raw(a), rb = ckpt.file_of(b).raw(b);
  const std::size_t w = safetensors_dtype_size(ia.dtype);
  // A float zero of either sign: every bit but the sign (the top bit of the last byte).
  const auto zero = [w](const std::byte* p) {
    for (std::size_t k = 0; k + 1 < w; ++k)
      if (p[k] != std::byte{0}) return false;
    return (p[w - 1] & std::byte{0x7f}) == std::byte{0};
  };
  const bool is_float = ia.dtype == SafetensorsDtype::F16 || ia.dtype == SafetensorsDtype::BF16 ||
                        ia.dtype == SafetensorsDtype::F32 || ia.dtype == SafetensorsDtype::F64;
  for (std::size_t at = 0; at < ra.size(); at += w)
    if (std::memcmp(ra.data() + at, rb.data() + at, w) != 0 &&
        !(is_float && zero(ra.data() + at) && zero(rb.data() + at)))
      return false;
  return true;
}

}  // namespace

std::vector<HfTensorMap> hf_tensor_maps(const ModelConfig& c, const std::vector<ParamInfo>& params,
                                        bool fused_experts) {
  std::vector<HfTensorMap> out;
  const bool next = c.family == ModelFamily::qwen3_next;
  for (const ParamInfo& p : params) {
    const std::string& n = p.name;
    if (ends_with(n, "linear_attn.in_proj_qkv.weight") && next) {
      add_qwen3_next_projections(
          c, params, n.substr(0, n.size() - std::string("in_proj_qkv.weight").size()), out);
    } else if (next && (ends_with(n, "linear_attn.in_proj_z.weight") ||
                        ends_with(n, "linear_attn.in_proj_b.weight") ||
                        ends_with(n, "linear_attn.in_proj_a.weight"))) {
      continue;  // part of in_proj_qkvz / in_proj_ba
    } else if (ends_with(n, "linear_attn.conv1d.weight")) {
      out.push_back(whole(hf_name(c, n), p, {p.shape.at(0), 1, p.shape.at(1)}));
    } else if (ends_with(n, "mlp.experts.gate_up_proj") && !fused_experts) {
      // [E, 2I, d] -> per expert gate_proj [I, d] (rows 0..I) and up_proj [I, d].
      const std::string base = n.substr(0, n.size() - std::string("gate_up_proj").size());
      const i64 E = p.shape.at(0), I = p.shape.at(1) / 2, d = p.shape.at(2);
      for (i64 e = 0; e < E; ++e)
        for (int part = 0; part < 2; ++part) {
          HfTensorMap m{hf_name(c, base + std::to_string(e) +
                                       (part ? ".up_proj.weight" : ".gate_proj.weight")),
                        {I, d},
                        {}};
          i64 hf = 0;
          add_rows(m, hf, p.offset + (e * 2 * I + part * I) * d, I, d);
          out.push_back(std::move(m));
        }
    } else if (ends_with(n, "mlp.experts.down_proj") && !fused_experts) {
      const std::string base = n.substr(0, n.size() - std::string("down_proj").size());
      const i64 E = p.shape.at(0), d = p.shape.at(1), I = p.shape.at(2);
      for (i64 e = 0; e < E; ++e) {
        HfTensorMap m{hf_name(c, base + std::to_string(e) + ".down_proj.weight"), {d, I}, {}};
        i64 hf = 0;
        add_rows(m, hf, p.offset + e * d * I, d, I);
        out.push_back(std::move(m));
      }
    } else {
      out.push_back(whole(hf_name(c, n), p, p.shape));
    }
  }
  return out;
}

template <typename T>
std::vector<T> gather_hf(const HfTensorMap& m, const T* flat) {
  std::vector<T> v(std::size_t(numel(m.shape)));
  for (const HfRun& r : m.runs) std::copy_n(flat + r.param, r.len, v.data() + r.hf);
  return v;
}

template <typename T>
void scatter_hf(const HfTensorMap& m, const T* values, T* flat) {
  for (const HfRun& r : m.runs) std::copy_n(values + r.hf, r.len, flat + r.param);
}

template <typename T>
void read_hf_weights(const std::string& dir, const ModelConfig& c,
                     const std::vector<ParamInfo>& params, std::vector<T>& flat,
                     std::vector<std::string>& skipped) {
  const i64 n = params.empty() ? 0 : params.back().offset + params.back().size;
  GDN_CHECK(i64(flat.size()) == n, "read_hf_weights: ", flat.size(), " values for a model of ", n);
  read_hf_weights(dir, c, params, {{0, 0, n}}, flat.data(), skipped);
}

template <typename T>
void read_hf_weights(const std::string& dir, const ModelConfig& c,
                     const std::vector<ParamInfo>& params, const std::vector<GlobalRun>& want,
                     T* out, std::vector<std::string>& skipped) {
  const SafetensorsDir ckpt(dir);
  std::vector<HfTensorMap> maps = hf_tensor_maps(c, params, false);
  // A MoE layer's experts may be stored fused (transformers' in-memory layout): then
  // those two tensors replace the layer's per-expert ones.
  for (HfTensorMap& f : hf_tensor_maps(c, params, true)) {
    if (f.name.find(".mlp.experts.") == std::string::npos || !ckpt.has(f.name)) continue;
    const std::string experts = f.name.substr(0, f.name.rfind('.') + 1);  // "...mlp.experts."
    std::erase_if(maps, [&](const HfTensorMap& m) { return m.name.rfind(experts, 0) == 0; });
    maps.push_back(std::move(f));
  }
  std::vector<GlobalRun> sorted = want;
  std::sort(sorted.begin(), sorted.end(),
            [](const GlobalRun& a, const GlobalRun& b) { return a.global < b.global; });
  std::set<std::string> used;
  for (const HfTensorMap& m : maps) {
    GDN_CHECK(ckpt.has(m.name), "checkpoint ", dir, " has no tensor '", m.name, "' (shape ",
              shape_str(m.shape), "), which this ", name_of(c.family),
              " model needs: is it the checkpoint of this config.json's architecture?");
    const TensorInfo& info = ckpt.info(m.name);
    GDN_CHECK(info.shape == m.shape, "checkpoint ", dir, ": tensor '", m.name, "' has shape ",
              shape_str(info.shape), ", expected ", shape_str(m.shape),
              " for this config (a checkpoint of another architecture?)");
    // The wanted elements of each copy run: the first wanted run ending past its start
    // onward, while they begin before its end.
    for (const HfRun& r : m.runs) {
      auto w = std::upper_bound(sorted.begin(), sorted.end(), r.param,
                                [](i64 x, const GlobalRun& g) { return x < g.global + g.n; });
      for (; w != sorted.end() && w->global < r.param + r.len; ++w) {
        const i64 lo = std::max(r.param, w->global),
                  hi = std::min(r.param + r.len, w->global + w->n);
        if (hi <= lo) continue;
        T* dst = out + w->at + (lo - w->global);
        const i64 first = r.hf + (lo - r.param);
        ckpt.read_range(m.name, std::size_t(first), std::size_t(hi - lo), dst);
        require_finite(dir, ckpt, m.name, dst, hi - lo, first);
      }
    }
    used.insert(m.name);
  }
  // A tied head that is stored anyway (torch .bin conversions keep both names) is the
  // embedding itself; one that differs must have been untied by tie_head_from_checkpoint.
  if (c.tie_word_embeddings && ckpt.has(kLmHead)) {
    const std::string embed = hf_name(c, "model.embed_tokens.weight");
    GDN_CHECK(same_values(ckpt, kLmHead, embed), "checkpoint ", dir, ": tensor '", kLmHead,
              "' differs from '", embed,
              "' while config.json sets tie_word_embeddings: true (transformers loads such a "
              "checkpoint untied; set \"tie_word_embeddings\": false)");
    used.insert(kLmHead);
  }
  for (const std::string& name : ckpt.names()) {
    if (used.count(name)) continue;
    const bool other_model = name.rfind("mtp.", 0) == 0 || name.rfind("model.visual.", 0) == 0 ||
                             name.rfind("visual.", 0) == 0;
    GDN_CHECK(other_model, "checkpoint ", dir, " has a tensor '", name,
              "' that this config's model does not have (a checkpoint of another architecture, "
              "or a config.json that does not match it?)");
    skipped.push_back(name);
  }
}

std::string tie_head_from_checkpoint(const std::string& dir, ModelConfig& c) {
  if (!c.tie_word_embeddings) return "";
  const SafetensorsDir ckpt(dir);
  const std::string embed = hf_name(c, "model.embed_tokens.weight");
  if (!ckpt.has(kLmHead) || !ckpt.has(embed) || same_values(ckpt, kLmHead, embed)) return "";
  c.tie_word_embeddings = false;
  return dir + "/config.json sets tie_word_embeddings: true, but the checkpoint's " + kLmHead +
         " differs from " + embed +
         ": the model is built untied with both, as transformers loads it (set "
         "\"tie_word_embeddings\": false in config.json to silence this)";
}

template <typename T>
void write_hf_checkpoint(const std::string& dir, const ModelConfig& c,
                         const std::vector<ParamInfo>& params, const std::vector<T>& flat) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  GDN_CHECK(!ec, "--export-hf: cannot create directory '", dir, "': ", ec.message());
  // The text model only, under "model." (a multimodal config's vision tower is not built).
  ModelConfig text = c;
  text.multimodal = false;
  nlohmann::json config = to_json(text);
  config["dtype"] = sizeof(T) == 8 ? "float64" : "float32";
  (void)write_file_atomically(dir + "/config.json", config.dump(2) + "\n", "--export-hf");
  const std::vector<HfTensorMap> maps = hf_tensor_maps(text, params, false);
  std::vector<std::vector<T>> data;
  data.reserve(maps.size());
  std::vector<SafetensorsTensor> tensors;
  for (const HfTensorMap& m : maps) {
    data.push_back(gather_hf(m, flat.data()));
    tensors.emplace_back(m.name, m.shape, data.back().data());
  }
  write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
}

#define GDN_INSTANTIATE(T)                                                                       \
  template std::vector<T> gather_hf<T>(const HfTensorMap&, const T*);                            \
  template void scatter_hf<T>(const HfTensorMap&, const T*, T*);                                 \
  template void read_hf_weights<T>(const std::string&, const ModelConfig&,                       \
                                   const std::vector<ParamInfo>&, std::vector<T>&,               \
                                   std::vector<std::string>&);                                   \
  template void read_hf_weights<T>(const std::string&, const ModelConfig&,                       \
                                   const std::vector<ParamInfo>&, const std::vector<GlobalRun>&, \
                                   T*, std::vector<std::string>&);                               \
  template void write_hf_checkpoint<T>(const std::string&, const ModelConfig&,                   \
                                       const std::vector<ParamInfo>&, const std::vector<T>&);
GDN_INSTANTIATE(float)
GDN_INSTANTIATE(double)
#undef GDN_INSTANTIATE

}  // namespace gdn
