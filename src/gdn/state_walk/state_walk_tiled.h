// The forward walks of the CUDA passes in fp32 and fp64, V-tiled (pass/walk_tiles.h): the
// transition's M and U columns and the output pass's state walk, one (batch * value head,
// column tile) job at a time on ChunkKernel's *_cols forms (chunk_state_walk.h). The CPU
// tests run these very bodies with HostExec or emulated block threads.
#pragma once

#include <cstdint>

#include "gdn/chunk/pass_args.h"
#include "gdn/chunk/walk_tiles.h"
#include "gdn/state_walk/chunk_state_walk.h"

namespace gdn::walk {

// LocalPass::transition, tiled over the K columns of M and then the V columns of U: per
// (b, h), jobs [0, tiles(K)) hold M's columns (compose_cols), the next tiles(V) U's
// (step_cols without outputs); job in [0, B Hv (tiles(K) + tiles(V))). Only the last
// segment reaches the slice's end.
template <typename T, typename Exec>
GDN_HD void transition(ChunkKernel<T, Exec>& math, const Exec& ex, const PassArgs<T>& a, T* M, T* U,
                       int bv, std::int64_t job, T* tile) {
  const int K = a.K, V = a.V, tk = tiles(K, bv), tv = tiles(V, bv);
  const int bh = int(job / (tk + tv)), t = int(job % (tk + tv));
  const int b = bh / a.Hv, h = bh % a.Hv;
  const bool empty = a.num_segments == 0;
  const SliceLayout::Segment s = empty ? SliceLayout::Segment{} : a.segments[a.num_segments - 1];
  const bool affine = empty || !s.starts;
  const bool of_m = t < tk;
  const int width = of_m ? K : V, c0 = (of_m ? t : t - tk) * bv;
  const int n = width - c0 < bv ? width - c0 : bv;
  const Tile<T> tl(tile, K, a.C, n);
  T* out = (of_m ? M + std::size_t(bh) * K * K : U + std::size_t(bh) * K * V) + c0;
  if (of_m) {  // M = I (the slice continues a sequence, or is empty), else 0
    for (int x = ex.tid(); x < K * n; x += ex.nthreads())
      tl.state[x] = affine && x / n == c0 + x % n ? T(1) : T(0);
  } else if (!empty && !affine && a.in.h0) {
    load(ex, tl.state, a.in.h0 + a.state_offset(a.seq_of(s, b), h) + c0, K, n, V);
  } else {
    fill(ex, tl.state, K * n, T(0));
  }
  ex.sync();
  if (!empty && (affine || !of_m))
    for (std::int64_t c = s.first_chunk; c < s.first_chunk + s.num_chunks; ++c) {
      if (of_m)
        math.compose_cols(a.factors_of(bh, c), n, tl.state, n, tl.s1);
      else
        math.step_cols(a.factors_of(bh, c), c0, n, tl.state, n, nullptr, 0, tl.s1);
    }
  store(ex, out, width, tl.state, K, n);
  ex.sync();  // the next job overwrites the tile
}

// LocalPass::output, part (a): the state walk alone, leaving each chunk's entry state (the
// job's columns) in a.states and the final states in ht; job in [0, B Hv tiles(V)). Per
// chunk two GEMMs (v_new = u - w h, h <- gamma h + k~^T v_new); the outputs, which nothing
// later in the walk reads, are made afterwards for every chunk at once
// (ChunkKernel::outputs), as fla's chunk_fwd_h / chunk_fwd_o split it.
template <typename T, typename Exec>
GDN_HD void state_walk(ChunkKernel<T, Exec>& math, const Exec& ex, const PassArgs<T>& a,
                       const T* h_in, T* ht, int bv, std::int64_t job, T* tile) {
  const int K = a.K, V = a.V;
  const Job j = job_of(job, V, bv);
  const int b = j.bh / a.Hv, hv = j.bh % a.Hv, c0 = j.c0, n = j.n;
  const Tile<T> tl(tile, K, a.C, n);
  for (std::int64_t si = 0; si < a.num_segments; ++si) {
    const SliceLayout::Segment s = a.segments[si];
    const int seq = a.seq_of(s, b);
    if (s.starts && a.in.h0)
      load(ex, tl.state, a.in.h0 + a.state_offset(seq, hv) + c0, K, n, V);
    else if (!s.starts && h_in)
      load(ex, tl.state, h_in + std::size_t(j.bh) * K * V + c0, K, n, V);
    else
      fill(ex, tl.state, K * n, T(0));
    ex.sync();
    for (std::int64_t c = s.first_chunk; c < s.first_chunk + s.num_chunks; ++c) {
      // Reads the tile only; step_cols writes it after its GEMMs' barriers.
      store_kept(ex, a.entry_state(j.bh, c) + c0, V, tl.state, K, n);
      math.step_cols(a.factors_of(j.bh, c), c0, n, tl.state, n, nullptr, 0, tl.s1);
    }
    if (s.ends && ht) store(ex, ht + a.state_offset(seq, hv) + c0, V, tl.state, K, n);
    ex.sync();  // the next segment or job overwrites the tile
  }
}

}  // namespace gdn::walk
