// --export-hf of a run whose state is spread over the ranks (docs/configs.md): the
// Hugging Face tensors go through rank 0 one file at a time, and a checkpoint larger than
// the size limit is cut into model-0000i-of-0000n.safetensors files with
// model.safetensors.index.json, as save_pretrained writes it. No rank holds more than one
// file's tensors (and its own part of the state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/model_config.h"
#include "model/params.h"
#include "train/state_gather.h"

namespace gdn {

// The files of an export: each tensor (in hf_tensor_maps order) in the first file with
// room for it; one file past max_bytes only when a tensor alone is larger.
std::vector<std::vector<std::size_t>> hf_export_files(const std::vector<std::int64_t>& tensor_bytes,
                                                      std::int64_t max_bytes);

// Collective over comm. `runs` are this rank's elements of the whole model's flat values
// (GlobalRun::global) at `values` (host); together the ranks' runs cover every element
// once. `whole` describes the whole model (parameter_infos). Rank 0 writes dir/config.json
// and the safetensors files, their tensors in `file_dtype` (f32, f64 or bf16; narrowing
// rounds to nearest even, as torch's .to() does).
template <typename T>
void write_hf_export(Communicator& comm, const std::string& dir, const ModelConfig& c,
                     const std::vector<ParamInfo>& whole, const std::vector<GlobalRun>& runs,
                     const T* values, std::int64_t max_bytes, DType file_dtype);

}  // namespace gdn
