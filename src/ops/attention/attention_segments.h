// The attention op's mask (attention.h: query row i of batch row b sees keys kstart[b, i] ..
// qpos[i]) as the segments a fused causal-attention kernel takes (cuDNN's SDPA with ragged
// offsets, cudnn_attention.h). A segment is n consecutive query rows of one batch row whose
// positions are consecutive (p0 .. p0 + n - 1) and that see the same first key ks (one
// document, or the whole row): row p0 + j sees keys ks .. p0 + j, which is the bottom-right
// causal mask of n queries over the L = p0 + n - ks keys from ks. A cp shard's rows are one
// segment per batch row; the layer-local balance's two stripes make two; packed documents
// one more per document boundary among the rows.
//
// Segments are grouped in waves in which no two of one batch row share a key: a backward
// that writes dK and dV per segment (rather than adding) then writes each key at most once
// per wave, and the waves' results are summed. The two stripes of a document that spans
// both (the balanced layout) see overlapping keys, so they land in two waves.
#pragma once

#include <cstdint>
#include <vector>

namespace gdn::ops {

struct AttentionSegment {
  int b;                 // the batch row
  std::int64_t q_begin;  // the first query row (of the Tq), and how many
  std::int64_t q_len;
  std::int64_t kv_begin;  // the first key (its position), and how many: q_pos0 + q_len - kv_begin
  std::int64_t kv_len;
};

struct AttentionSegments {
  std::vector<std::vector<AttentionSegment>> waves;
  std::size_t count() const;
  std::int64_t max_q_len() const;
  std::int64_t max_kv_len() const;
};

// The segments of B rows of Tq queries at positions qpos (ascending within a stripe) with
// first keys kstart [B, Tq] (null: 0, no documents), every row in exactly one segment.
// Host pointers; the positions must satisfy check_attention_positions (attention.h).
AttentionSegments attention_segments(const std::int64_t* qpos, const std::int64_t* kstart, int B,
                                     std::int64_t Tq);

}  // namespace gdn::ops
