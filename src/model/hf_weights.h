// gdn-cp's parameters <-> a Hugging Face checkpoint's tensors (names, shapes and row
// layouts as each family's save_pretrained writes them):
//
//  - the text model's tensors are under "model." (Qwen3.5's multimodal checkpoints:
//    "model.language_model."); lm_head.weight is absent when tied;
//  - Qwen3-Next's in_proj_qkvz and in_proj_ba interleave per key-head group g:
//    [q_g (K rows) | k_g (K) | v_g (Hv/Hk V) | z_g (Hv/Hk V)] and [b_g (Hv/Hk) | a_g (Hv/Hk)]
//    (fix_query_key_value_ordering); gdn-cp holds Qwen3.5's in_proj_qkv, in_proj_z,
//    in_proj_b, in_proj_a, which keep the heads in order;
//  - conv1d.weight is [C, 1, W] there, [C, W] here;
//  - experts are per-expert mlp.experts.{e}.{gate,up,down}_proj.weight there (fused
//    mlp.experts.gate_up_proj / down_proj are read too), fused here.
// Every parameter element maps to exactly one checkpoint element, so the same map reads
// weights, writes them, and writes gradients in the checkpoint's layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/model_config.h"
#include "model/params.h"

namespace gdn {

// Copies of `len` elements: checkpoint tensor element hf .. hf+len <-> flat parameter
// element param .. param+len.
struct HfRun {
  std::int64_t hf = 0, param = 0, len = 0;
};

struct HfTensorMap {
  std::string name;  // in the checkpoint
  Shape shape;
  std::vector<HfRun> runs;  // cover the tensor once
};

// The checkpoint tensors of a model, in parameter order. `fused_experts`: the fused
// expert tensors instead of the per-expert ones. Throws when a parameter has no mapping.
std::vector<HfTensorMap> hf_tensor_maps(const ModelConfig& c, const std::vector<ParamInfo>& params,
                                        bool fused_experts = false);

// A tensor's values in the checkpoint layout, gathered from the flat parameter (or
// gradient) buffer, and scattered back.
template <typename T>
std::vector<T> gather_hf(const HfTensorMap& m, const T* flat);
template <typename T>
void scatter_hf(const HfTensorMap& m, const T* values, T* flat);

// Reads a checkpoint directory (config.json's model plus model.safetensors or its index
// and shards) into the flat parameter values, converting bf16, f16, f32, f64 to T. A
// missing, unexpected or mis-shaped tensor, and a NaN or Inf value (named with its first
// bad element), are errors; mtp.* and the vision tower (model.visual.*) are skipped and
// returned in `skipped` for one warning. A tied model takes a stored lm_head.weight only
// when it equals the embedding (see tie_head_from_checkpoint).
// transformers' rule for tie_word_embeddings at load (PreTrainedModel.tie_weights): when
// the checkpoint holds an lm_head.weight whose values differ from the embedding's, the
// two are not tied, whatever config.json says. Sets c.tie_word_embeddings = false then
// and returns the warning to print; returns "" and leaves c alone otherwise. Call it on
// the config of dir before building the model.
std::string tie_head_from_checkpoint(const std::string& dir, ModelConfig& c);

template <typename T>
void read_hf_weights(const std::string& dir, const ModelConfig& c,
                     const std::vector<ParamInfo>& params, std::vector<T>& flat,
                     std::vector<std::string>& skipped);
// The same checks, but only the elements `want` asks for ((global, at, n) of params' flat
// order, into out[at, at + n)) are read, so a rank reads only its part of each tensor,
// and only the tensors that hold its part; a non-finite value is found by the rank that
// reads it.
template <typename T>
void read_hf_weights(const std::string& dir, const ModelConfig& c,
                     const std::vector<ParamInfo>& params, const std::vector<GlobalRun>& want,
                     T* out, std::vector<std::string>& skipped);

// Writes dir/config.json (the text model's config, to_json) and dir/model.safetensors in
// T's dtype, the way save_pretrained writes the text model (per-expert tensors, no
// lm_head.weight when tied), atomically; creates dir.
template <typename T>
void write_hf_checkpoint(const std::string& dir, const ModelConfig& c,
                         const std::vector<ParamInfo>& params, const std::vector<T>& flat);

}  // namespace gdn
