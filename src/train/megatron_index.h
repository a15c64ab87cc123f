// The index (.idx) of a Megatron-LM indexed dataset, the format preprocess_data.py writes
// (megatron/core/datasets/indexed_dataset.py): a header, then per sequence its length in
// tokens and its byte offset in the .bin, then the documents as ranges of sequences.
//
//   9 bytes "MMIDIDX\0\0" | u64 version (1) | u8 dtype code | u64 sequences S |
//   u64 document count D (sequence indices, D - 1 documents) | i32 lengths [S] |
//   i64 byte offsets [S] | i64 document starts [D] (0, ..., S) | (i8 modes [S], multimodal)
//
// Read with pread like the token files: the header and one streaming check at
// construction, then a binary search per window for the documents that start in it.
// Little-endian, as Megatron writes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/positional_file.h"

namespace gdn {

class MegatronIndex {
 public:
  // Checks the header (magic, version 1, an integer token type), the file's size, that
  // the sequences lie back to back in the .bin from byte 0 (offset i = the lengths before
  // it times the token size) and that the document starts run from 0 to S, never
  // decreasing. Errors name the file and the first entry that is wrong.
  explicit MegatronIndex(const std::string& idx_path);

  const std::string& path() const { return file_.path(); }
  // The token type's code in the header (4 int32, 5 int64, 8 uint16) and its size.
  int dtype_code() const { return code_; }
  int token_bytes() const { return token_bytes_; }
  std::int64_t tokens() const { return tokens_; }            // the sum of the lengths
  std::int64_t documents() const { return doc_count_ - 1; }  // D - 1
  // The token positions p of the stream with begin < p < end where a document starts,
  // ascending (documents without tokens give no position of their own).
  std::vector<std::int64_t> starts_in(std::int64_t begin, std::int64_t end) const;
  // Whether some document holds two tokens or more (one has a target inside it).
  bool has_multi_token_document() const;

 private:
  std::int64_t read_i64(std::int64_t offset) const;
  std::int64_t doc_start(std::int64_t d) const;  // token position where document d starts

  PositionalFile file_;
  int code_ = 0, token_bytes_ = 0;
  std::int64_t seq_count_ = 0, doc_count_ = 0, tokens_ = 0;
  std::int64_t offsets_at_ = 0, docs_at_ = 0;  // byte offsets of the arrays in the file
};

}  // namespace gdn
