// How a slice [t0, t1) of the sequence is cut for the chunked passes: into segments at
// packed-sequence boundaries, and each segment into chunks of at most C rows (chunks
// restart at every segment). The host and the CUDA local passes share it; the CUDA one
// copies the two tables to the device, so both element types are trivially copyable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "gdn/problem.h"

namespace gdn {

struct SliceLayout {
  struct Segment {
    std::int64_t begin, end;  // local token range
    int seq;                  // packed sequence index (row index b when not packed)
    bool starts, ends;        // the sequence starts / ends inside this slice
    std::int64_t first_chunk, num_chunks;
  };
  struct Chunk {
    std::int64_t begin;  // local token of the first row
    int rows;            // valid rows (<= C)
  };

  std::int64_t t0 = 0, t1 = 0;
  std::vector<Segment> segments;
  std::vector<Chunk> chunks;

  SliceLayout(const GdnProblem& p, std::int64_t t0_, std::int64_t t1_) : t0(t0_), t1(t1_) {
    GDN_CHECK(0 <= t0 && t0 <= t1 && t1 <= p.T, "slice [", t0, ", ", t1,
              ") is not inside the sequence [0, ", p.T, ")");
    const int C = p.chunk_size;
    for (const SequenceRange& r : sequences_of_row(p, 0)) {
      const std::int64_t b = std::max(r.begin, t0), e = std::min(r.end, t1);
      if (b >= e) continue;
      Segment s{b - t0, e - t0, r.seq, r.begin >= t0, r.end <= t1, std::int64_t(chunks.size()), 0};
      for (std::int64_t c = s.begin; c < s.end; c += C)
        chunks.push_back({c, int(std::min<std::int64_t>(C, s.end - c))});
      s.num_chunks = std::int64_t(chunks.size()) - s.first_chunk;
      segments.push_back(s);
    }
  }

  std::int64_t tokens() const { return t1 - t0; }
  // The state row of a segment: its packed sequence, or the batch row when not packed.
  static int seq_of(const GdnProblem& p, const Segment& s, int b) {
    return p.cu_seqlens.empty() ? b : s.seq;
  }
};

}  // namespace gdn
