// Packed documents (train key `documents`, docs/design.md §5d): inside a window of T
// tokens, each document is an independent sequence. Row b of a batch holds documents
// [cu[b][i], cu[b][i + 1]) of its global positions, 0 = cu[b][0] < ... < cu[b][n] = T.
// Every rank of a cp group holds the same boundaries of the whole window (they are a few
// numbers per document), so each layer finds what crosses its shard without exchanging
// them: the GDN state resets at each boundary, the conv does not look across one, the
// attention mask is block-diagonal and RoPE positions restart at 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cp/shard.h"

namespace gdn {

class Documents {
 public:
  Documents() = default;
  // One row per batch row; each must be 0 = cu[0] < cu[1] < ... < cu.back() = T: an error
  // names the row, the index and the value otherwise.
  Documents(std::vector<std::vector<std::int64_t>> cu, std::int64_t T);
  // Every row one document: the boundaries {0, T}.
  static Documents whole(int B, std::int64_t T);
  // From where documents start in each row: positions p with 0 < p <= T, ascending (p = T:
  // the token after the window starts one, so the last target is not one). Errors name
  // the row and the value.
  static Documents from_starts(const std::vector<std::vector<std::int64_t>>& starts,
                               std::int64_t T);
  // The document starts of a window whose tokens [0, T) are `inputs`: after every `eos`
  // (a document ends with its EOS token), p = t + 1 for inputs[t] == eos.
  static std::vector<std::int64_t> starts_after(const std::int32_t* inputs, std::int64_t T,
                                                std::int32_t eos);

  int rows() const { return int(cu_.size()); }
  std::int64_t length() const { return T_; }
  const std::vector<std::int64_t>& row(int b) const { return cu_[std::size_t(b)]; }
  // Sets the targets that are not ones to ops::kIgnoreTarget: the one of a document's last
  // token (its next token starts another document). targets [B, s.size()] of shard s.
  void mask_targets(const Shard& s, std::int32_t* targets) const;
  // How many targets of all the rows mask_targets leaves out.
  std::int64_t ignored_targets() const;
  // The rows [first, first + count) (a dp group's part of a global batch).
  Documents slice(int first, int count) const;
  // The global position where the document holding position t of row b starts.
  std::int64_t start_of(int b, std::int64_t t) const;
  // Positions inside their documents of the tokens s of every row, [B, s.size()]: where
  // RoPE puts them and how far back the conv may look.
  std::vector<std::int64_t> positions(const Shard& s) const;
  // The same for the global positions qpos of every row, [B, qpos.size()]: the first key
  // each query row of attention may see.
  std::vector<std::int64_t> starts(const std::vector<std::int64_t>& qpos) const;
  // Documents per row: their count, mean and largest length over all rows.
  struct Summary {
    std::int64_t documents = 0, longest = 0;
    double mean_length = 0;
  };
  Summary summary() const;

 private:
  std::vector<std::vector<std::int64_t>> cu_;
  std::vector<char> ends_window_;  // per row: a document starts right after the window
  std::int64_t T_ = 0;
};

}  // namespace gdn
