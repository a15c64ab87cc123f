// attention_segments (the cuDNN path's ragged segments) against the op's mask itself: for
// every query row of every cp shard (contiguous and the layer-local balance's stripes),
// with and without packed documents, the row lies in exactly one segment, and the keys the
// segment's bottom-right causal mask gives it are kstart .. qpos; within a wave no two
// segments of a batch row share a key. And the host side of the cuDNN path: the graphs' key
// (a capacity of segments), the refusal notes (once per graph), the index tables cuDNN reads
// (rows and ragged offsets, empty segments at the end, int32 refused past its range), and
// the kernel choice by backend, precision and head dim.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "cp/attention_cp.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_segments.h"
#include "ops/attention/cudnn_attention.h"

using namespace gdn;
using namespace gdn::ops;
using i64 = std::int64_t;

namespace {

// Each row's first key: the last document start at or before its position.
std::vector<i64> first_keys(const std::vector<i64>& qpos, const std::vector<i64>& starts) {
  std::vector<i64> ks;
  for (i64 p : qpos) ks.push_back(*(std::upper_bound(starts.begin(), starts.end(), p) - 1));
  return ks;
}

void check_segments(const std::vector<i64>& qpos, const std::vector<i64>& kstart, int B) {
  const i64 Tq = i64(qpos.size());
  const AttentionSegments segs =
      attention_segments(qpos.data(), kstart.empty() ? nullptr : kstart.data(), B, Tq);
  std::vector<int> covered(std::size_t(B * Tq), 0);
  for (const std::vector<AttentionSegment>& wave : segs.waves) {
    for (std::size_t x = 0; x < wave.size(); ++x) {
      const AttentionSegment& s = wave[x];
      REQUIRE(s.q_len >= 1);
      REQUIRE(s.kv_len >= s.q_len);  // bottom-right: the last query sees every key
      for (i64 j = 0; j < s.q_len; ++j) {
        const i64 i = s.q_begin + j;
        ++covered[std::size_t(s.b * Tq + i)];
        const i64 want_lo = kstart.empty() ? 0 : kstart[std::size_t(s.b * Tq + i)];
        // Bottom-right alignment: query j sees kv indices 0 .. j + kv_len - q_len.
        CHECK(s.kv_begin == want_lo);
        CHECK(s.kv_begin + j + s.kv_len - s.q_len == qpos[std::size_t(i)]);
      }
      for (std::size_t y = x + 1; y < wave.size(); ++y) {
        const AttentionSegment& t = wave[y];
        const bool share =
            s.b == t.b && s.kv_begin < t.kv_begin + t.kv_len && t.kv_begin < s.kv_begin + s.kv_len;
        CHECK_FALSE(share);
      }
    }
  }
  for (int c : covered) REQUIRE(c == 1);
}

}  // namespace

TEST_CASE("attention segments cover every cp shard's rows with the op's mask", "[attention]") {
  const i64 T = 240;
  for (int P : {1, 2, 3, 4})
    for (bool balanced : {false, true})
      for (int r = 0; r < P; ++r) {
        INFO("P " << P << " rank " << r << (balanced ? " balanced" : ""));
        const std::vector<i64> qpos = attention_query_positions(T, P, r, balanced);
        check_segments(qpos, {}, 1);
        const AttentionSegments segs =
            attention_segments(qpos.data(), nullptr, 2, i64(qpos.size()));
        // One segment per stripe and batch row, and the stripes of a row share keys; the
        // last rank's two stripes (chunks P - 1 and P) are adjacent: one run, one segment.
        const bool two = balanced && P > 1 && r != P - 1;
        CHECK(segs.count() == (two ? 4u : 2u));
        CHECK(segs.waves.size() == (two ? 2u : 1u));
        Rng rng(7 + std::uint64_t(P * 10 + r));
        for (int trial = 0; trial < 5; ++trial) {
          std::vector<i64> starts = {0};
          for (i64 p = 1; p < T; ++p)
            if (rng.uniform(0, 1) < 0.03) starts.push_back(p);
          const std::vector<i64> row = first_keys(qpos, starts);
          std::vector<i64> kstart = row;  // two batch rows with different documents
          std::vector<i64> starts2 = {0, T / 3};
          const std::vector<i64> row2 = first_keys(qpos, starts2);
          kstart.insert(kstart.end(), row2.begin(), row2.end());
          check_segments(qpos, kstart, 2);
        }
      }
}

TEST_CASE("attention segments refuse a row that sees no key", "[attention]") {
  const std::vector<i64> qpos = {4, 5, 6}, kstart = {0, 6, 7};
  CHECK_THROWS_AS(attention_segments(qpos.data(), kstart.data(), 1, 3), Error);
}

TEST_CASE("cuDNN attention graphs are keyed by a segment capacity, refusals noted once",
          "[attention]") {
  // Calls whose packed documents differ in number share a graph up to the next power of two.
  const auto shape = [](std::size_t n) {
    return cudnn_attention_shape(true, 1, 4096, 8192, 16, 2, 256, 0.0625, n);
  };
  CHECK(shape(1).segments == 1);
  CHECK(shape(3).segments == 4);
  CHECK(shape(5).segments == 8);
  const auto same = [](const CudnnAttentionShape& a, const CudnnAttentionShape& b) {
    return !(a < b) && !(b < a);
  };
  CHECK(same(shape(5), shape(8)));
  CHECK_FALSE(same(shape(4), shape(5)));
  CHECK_FALSE(same(shape(4), cudnn_attention_shape(false, 1, 4096, 8192, 16, 2, 256, 0.0625, 4)));
  CHECK_FALSE(same(shape(4), cudnn_attention_shape(true, 1, 4096, 8192, 16, 2, 128, 0.0625, 4)));
  CHECK_THROWS_AS(shape(0), Error);
  take_cudnn_attention_notes();
  note_cudnn_attention_refusal(shape(5), "head dim");
  note_cudnn_attention_refusal(shape(6), "head dim");  // the same graph: said once
  note_cudnn_attention_refusal(shape(9), "too many");
  const std::vector<std::string> notes = take_cudnn_attention_notes();
  REQUIRE(notes.size() == 2);
  CHECK(notes[0] ==
        "backward, 16 / 2 heads, D 256, 8 segments of <= 4096 queries over <= 8192 "
        "keys: head dim");
  CHECK(take_cudnn_attention_notes().empty());
}

TEST_CASE("cuDNN's index tables: each segment's rows and offsets, empty ones at the end",
          "[attention]") {
  // Two batch rows of 100 queries at positions 300..399 over 400 keys, documents in row 1.
  const i64 Tq = 100, Tk = 400;
  const int Hq = 4, Hkv = 2, D = 8;
  std::vector<i64> qpos(Tq), kstart(2 * Tq, 0);
  for (i64 i = 0; i < Tq; ++i) qpos[i] = 300 + i, kstart[Tq + i] = qpos[i] < 350 ? 120 : 350;
  const AttentionSegments segs = attention_segments(qpos.data(), kstart.data(), 2, Tq);
  REQUIRE(segs.waves.size() == 1);
  const std::vector<AttentionSegment>& w = segs.waves[0];
  REQUIRE(w.size() == 3);
  const CudnnAttentionTables t = cudnn_attention_tables(w, 4, Tq, Tk, Hq, Hkv, D);
  // Row 0: queries 0..99 over keys 0..399; row 1: queries 0..49 over keys 120..349, then
  // queries 50..99 over keys 350..399.
  CHECK(t.seq_q == std::vector<std::int32_t>{100, 50, 50, 0});
  CHECK(t.seq_kv == std::vector<std::int32_t>{400, 230, 50, 0});
  CHECK(t.off_q ==
        std::vector<std::int32_t>{0, 100 * Hq * D, 150 * Hq * D, 200 * Hq * D, 200 * Hq * D});
  CHECK(t.off_kv ==
        std::vector<std::int32_t>{0, 520 * Hkv * D, 750 * Hkv * D, 800 * Hkv * D, 800 * Hkv * D});
  CHECK(t.off_stats == std::vector<std::int32_t>{0, 100 * Hq, 150 * Hq, 200 * Hq, 200 * Hq});
  CHECK_THROWS_AS(cudnn_attention_tables(w, 2, Tq, Tk, Hq, Hkv, D), Error);  // over capacity
  // Segments out of row order, or overlapping, are not packed sequences: refused.
  CHECK_THROWS_AS(cudnn_attention_tables({w[1], w[0]}, 4, Tq, Tk, Hq, Hkv, D), Error);
  // An offset past int32: refused, naming it.
  CHECK_THROWS_WITH(cudnn_attention_tables(w, 4, Tq, i64(1) << 30, Hq, Hkv, D),
                    Catch::Contains("key offset"));
}

TEST_CASE("the CUDA attention's kernel choice by backend, precision and head dim", "[attention]") {
  using B = AttentionBackend;
  using K = AttentionKernel;
  const Precision bf = Precision::bf16, pl = Precision::plain;
  // auto: cuDNN in bf16 where built, else flash up to D 256, else exact; exact in float.
  CHECK(attention_kernel(B::automatic, bf, 128, true) == K::cudnn);
  CHECK(attention_kernel(B::automatic, bf, 128, false) == K::flash);
  CHECK(attention_kernel(B::automatic, bf, 512, false) == K::exact);
  CHECK(attention_kernel(B::automatic, pl, 128, true) == K::exact);
  // cudnn in either precision (flash where not built), flash and exact as asked.
  CHECK(attention_kernel(B::cudnn, pl, 64, true) == K::cudnn);
  CHECK(attention_kernel(B::cudnn, pl, 64, false) == K::flash);
  CHECK(attention_kernel(B::flash, bf, 256, true) == K::flash);
  CHECK(attention_kernel(B::flash, pl, 300, true) == K::exact);
  CHECK(attention_kernel(B::exact, bf, 64, true) == K::exact);
}
