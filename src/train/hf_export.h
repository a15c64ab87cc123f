// --export-hf of a run whose state is spread over the ranks (docs/configs.md): the
// Hugging Face tensors go through rank 0 one file at a time, and a checkpoint larger than
// the size limit is cut into model-0000i-of-0000n.safetensors files with
// model.safetensors.index.json, as save_pretrained writes it. No rank holds more than one
// file's tensors (and its own part of the state).
//
// An export replaces the directory's previous export as a whole, whatever either's
// layout: a reader that finds model.safetensors loads it before any index, so a stale one
// beside new shards would be loaded instead of them. The new export is written into a
// directory beside DIR and swapped with it in one rename (renameat2 RENAME_EXCHANGE;
// where the file system lacks it, two renames, between which DIR is briefly absent), so
// a reader sees the old export or the new one, never a mix. Files in DIR that an export
// does not write (a tokenizer, a README) are carried into the new one, with a warning
// naming them; anything else there (a folder, a link) is refused at start-up.
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

// Start-up check of --export-hf DIR: creates it when missing, checks that DIR and its
// parent (where the new export is written) are writable, creates and removes the very
// folders and longest file name the export will (so a name too long for the file system
// fails now, not after training), and refuses entries of DIR that are neither an
// export's files nor regular files, naming them (regular files are carried over by the
// export, and named then).
void check_export_dir(const std::string& dir);

// Collective over comm. `runs` are this rank's elements of the whole model's flat values
// (GlobalRun::global) at `values` (host); together the ranks' runs cover every element
// once. `whole` describes the whole model (parameter_infos). Rank 0 writes dir/config.json
// and the safetensors files, their tensors in `file_dtype` (f32, f64 or bf16; narrowing
// rounds to nearest even, as torch's .to() does). A failure on rank 0 (a full disk, say)
// is agreed: every rank throws gdn::Error, rank 0 with the reason, and the previous
// export is left as it was.
template <typename T>
void write_hf_export(Communicator& comm, const std::string& dir, const ModelConfig& c,
                     const std::vector<ParamInfo>& whole, const std::vector<GlobalRun>& runs,
                     const T* values, std::int64_t max_bytes, DType file_dtype);

}  // namespace gdn
