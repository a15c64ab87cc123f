// The backward's walks of the CUDA passes in fp32 and fp64, V-tiled (pass/walk_tiles.h):
// the adjoint (backward phase 1) and backward part (a), one (batch * value head, column
// tile) job at a time on ChunkKernel::adjoint_cols (chunk_adjoint_walk.h). The CPU tests
// run these very bodies with HostExec or emulated block threads.
#pragma once

#include <cstdint>

#include "gdn/adjoint_walk/chunk_adjoint_walk.h"
#include "gdn/chunk/pass_args.h"
#include "gdn/chunk/walk_tiles.h"

namespace gdn::walk {

// The adjoint over the chunks of segment s, last to first, on the tile's mu (initialised,
// behind a barrier): mu <- M_c^T mu + A_c^T dO_c (adjoint_cols), storing each chunk's exit
// adjoint (mu before its step) into a.adjoints when `keep` is set.
template <typename T, typename Exec>
GDN_HD void adjoint_segment(ChunkKernel<T, Exec>& math, const Exec& ex, const PassArgs<T>& a,
                            const Tile<T>& tl, const Job& j, const SliceLayout::Segment& s,
                            const T* dO, bool keep) {
  const int b = j.bh / a.Hv, hv = j.bh % a.Hv, V = a.V, n = j.n;
  const std::int64_t stride = std::int64_t(a.Hv) * V;
  for (std::int64_t c = s.first_chunk + s.num_chunks - 1; c >= s.first_chunk; --c) {
    if (keep) store_kept(ex, a.exit_adjoint(j.bh, c) + j.c0, V, tl.state, a.K, n);
    const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
    const int rows = a.chunks[c].rows;
    const T* src = dO + (t * a.Hv + hv) * V + j.c0;
    // dO's tile, zero past the chunk's rows: s2 was last read before the previous
    // adjoint_cols' exit barrier, and the next GEMM's entry barrier orders these writes.
    for (int x = ex.tid(); x < a.C * n; x += ex.nthreads()) {
      const int i = x / n, d = x % n;
      tl.s2[x] = i < rows ? src[i * stride + d] : T(0);
    }
    math.adjoint_cols(a.factors_of(j.bh, c), n, tl.state, n, tl.s2, n, tl.s1);
  }
}

// LocalPass::adjoint (backward phase 1): D = dLoss/dh_in from a zero exit adjoint; job in
// [0, B Hv tiles(V)). Only a first segment that continues a sequence carries gradient to
// h_in.
template <typename T, typename Exec>
GDN_HD void adjoint(ChunkKernel<T, Exec>& math, const Exec& ex, const PassArgs<T>& a, const T* dO,
                    const T* dht, T* D, int bv, std::int64_t job, T* tile) {
  const int K = a.K, V = a.V;
  const Job j = job_of(job, V, bv);
  const int b = j.bh / a.Hv, hv = j.bh % a.Hv;
  const Tile<T> tl(tile, K, a.C, j.n);
  const bool carries = a.num_segments > 0 && !a.segments[0].starts;
  const SliceLayout::Segment s = carries ? a.segments[0] : SliceLayout::Segment{};
  if (carries && s.ends && dht)
    load(ex, tl.state, dht + a.state_offset(a.seq_of(s, b), hv) + j.c0, K, j.n, V);
  else
    fill(ex, tl.state, K * j.n, T(0));
  ex.sync();
  if (carries) adjoint_segment(math, ex, a, tl, j, s, dO, false);
  store(ex, D + std::size_t(j.bh) * K * V + j.c0, V, tl.state, K, j.n);
  ex.sync();
}

// Backward, part (a): every segment's adjoint walk from its exit adjoint (dht where the
// sequence ends in the slice, lambda where it continues past it, else 0, as the host's
// fused backward starts each segment), every chunk's exit adjoint into a.adjoints, and dh0
// where a sequence starts; job in [0, B Hv tiles(V)). Part (b) is one ChunkKernel::backward
// per chunk from its entry state and exit adjoint.
template <typename T, typename Exec>
GDN_HD void backward_walk(ChunkKernel<T, Exec>& math, const Exec& ex, const PassArgs<T>& a,
                          const T* lambda, const T* dO, const T* dht, T* dh0, int bv,
                          std::int64_t job, T* tile) {
  const int K = a.K, V = a.V;
  const Job j = job_of(job, V, bv);
  const int b = j.bh / a.Hv, hv = j.bh % a.Hv;
  const Tile<T> tl(tile, K, a.C, j.n);
  for (std::int64_t si = a.num_segments - 1; si >= 0; --si) {
    const SliceLayout::Segment s = a.segments[si];
    const int seq = a.seq_of(s, b);
    if (s.ends && dht)
      load(ex, tl.state, dht + a.state_offset(seq, hv) + j.c0, K, j.n, V);
    else if (!s.ends && lambda)
      load(ex, tl.state, lambda + std::size_t(j.bh) * K * V + j.c0, K, j.n, V);
    else
      fill(ex, tl.state, K * j.n, T(0));
    ex.sync();
    adjoint_segment(math, ex, a, tl, j, s, dO, true);
    if (s.starts && dh0) store(ex, dh0 + a.state_offset(seq, hv) + j.c0, V, tl.state, K, j.n);
    ex.sync();  // the next segment or job overwrites the tile
  }
}

}  // namespace gdn::walk
