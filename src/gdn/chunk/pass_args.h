// What the kernels of every phase work on: a view of the slice's layout, inputs and
// buffers, by value, as LocalPass (gdn/pass/local_pass.h) makes it for each call. The
// passes that take it on each device are declared in gdn/pass/device_passes.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/bf16.h"
#include "core/device.h"
#include "core/hd.h"
#include "gdn/chunk/chunk_gemm.h"
#include "gdn/problem.h"
#include "gdn/slice_layout.h"

namespace gdn {

// The bf16 mode's tensors as ChunkedGdnBf16 stores them ([B, Tl, H, D] like `in`), for the
// register kernels to read and write as they are: q, k, v, beta and dO widened as they
// load them (q and k also normalised, l2norm_row's bits, where `l2norm`), o rounded as they
// store it. No widened copies. Null: the kernels read PassArgs::in, dO and o in T.
struct Bf16Io {
  const Bf16 *q = nullptr, *k = nullptr, *v = nullptr, *beta = nullptr, *dO = nullptr;
  Bf16* o = nullptr;
  bool l2norm = false;
};

template <typename T>
struct PassArgs {
  using Segment = SliceLayout::Segment;
  using Chunk = SliceLayout::Chunk;

  int B, Hk, Hv, K, V, C, G;  // G = Hv / Hk
  bool packed;                // cu_seqlens given
  std::int64_t Tl;            // tokens of the slice
  std::int64_t num_segments, num_chunks;
  const Segment* segments;  // the layout's tables, in the device's memory
  const Chunk* chunks;
  GdnInputView<T> in;
  T scale;
  std::size_t fsize;  // elements of one chunk's factors
  T* factors;         // [B * Hv, chunks, fsize]; valid when `prepared`
  bool prepared;
  T* states;     // [B * Hv, chunks, K, V]
  T* workspace;  // the device's scratch (workspace_elems of it)
  // [B * Hv, chunks, K, V]: the adjoint of every chunk's exit state, which the CUDA backward's
  // sequential walk stores for its chunk-parallel part (pass::chunk_parallel_backward);
  // null on the host, whose backward stays one fused walk.
  T* adjoints = nullptr;
  // CUDA, float: what the chunk math's GEMMs run on (pass::chunk_gemm, from the problem's
  // precision); the host ignores it.
  ChunkGemm gemm = ChunkGemm::kFp32;
  // The factors are Bf16Factors blocks (gdn/chunk/bf16_factors.h), which only the bf16
  // register kernels read, instead of ChunkFactors<T>: LocalPass sets it from what
  // prepare() chose (pass::bf16_factors), and every pass then takes its register kernel.
  // The entry states and exit adjoints are then bf16 too (bf16_entry_state): half of
  // `states` and `adjoints` holds them.
  bool bf16_factors = false;
  // Set only with bf16_factors (LocalPass::set_bf16_io).
  Bf16Io io;

  GDN_HD int seq_of(const Segment& s, int b) const { return packed ? s.seq : b; }
  GDN_HD std::int64_t state_offset(int seq, int h) const {
    return (std::int64_t(seq) * Hv + h) * K * V;
  }
  GDN_HD T* factors_of(int bh, std::int64_t c) const {
    return factors + (std::size_t(bh) * num_chunks + c) * fsize;
  }
  GDN_HD T* entry_state(int bh, std::int64_t c) const {
    return states + (std::size_t(bh) * num_chunks + c) * K * V;
  }
  GDN_HD T* exit_adjoint(int bh, std::int64_t c) const {
    return adjoints + (std::size_t(bh) * num_chunks + c) * K * V;
  }
  // The same in bf16 (with bf16_factors): what only an mma and part 1's dgamma read, rounded
  // once as the walk stores it (the tiled walks round their float copies alike on bf16
  // GEMMs, walk::store_kept).
  GDN_HD Bf16* bf16_entry_state(int bh, std::int64_t c) const {
    return reinterpret_cast<Bf16*>(states) + (std::size_t(bh) * num_chunks + c) * K * V;
  }
  GDN_HD Bf16* bf16_exit_adjoint(int bh, std::int64_t c) const {
    return reinterpret_cast<Bf16*>(adjoints) + (std::size_t(bh) * num_chunks + c) * K * V;
  }
  // The segment holding chunk c (0 <= c < num_chunks): a binary search over the segments'
  // first chunks, so that a pass over independent chunks finds which sequence a chunk
  // belongs to and whether it is the last chunk of one.
  GDN_HD std::int64_t segment_of(std::int64_t c) const {
    std::int64_t lo = 0, hi = num_segments - 1;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi + 1) / 2;
      if (segments[mid].first_chunk <= c)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }
};

}  // namespace gdn
