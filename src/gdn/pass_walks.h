// The V-tiled sequential walks of the CUDA passes (local_pass_cuda.cu), one (batch * value
// head, column tile) job at a time, written once against a ChunkKernel execution policy
// (chunk_kernel.h) so that the CPU tests run the very same job bodies (with HostExec, or
// with emulated block threads) against the host passes, without a GPU
// (tests/unit/test_chunk_kernel.cpp). On the GPU each job is one block and `tile` is its dynamic
// shared memory.
//
// A job owns columns [c0, c0 + n) of the state of one (b, h): the K x n state tile and two
// C x n scratch tiles (dense, leading dimension n) live in `tile`; it reads only those
// columns of u, h0, h_in, dht, lambda and dO and writes only those of M or U, the chunk
// entry states, ht, D, the exit adjoints and dh0. Every thread of the group calls with the
// same arguments (uniform control flow); the barriers are ex.sync() and the GEMMs'.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/hd.h"
#include "gdn/pass_args.h"
#include "ops/gdn_chunk/chunk_kernel.h"

namespace gdn::walk {

// Jobs per (b, h): the column tiles of width bv over `width` columns.
GDN_HD inline int tiles(int width, int bv) {
  return (width + bv - 1) / bv;
}

// Elements of `tile` one job needs: the K x bv state and two C x bv scratch tiles.
GDN_HD inline std::size_t tile_elems(int K, int C, int bv) {
  return (std::size_t(K) + 2 * std::size_t(C)) * bv;
}

template <typename T>
struct Tile {
  T *state, *s1, *s2;
  GDN_HD Tile(T* tile, int K, int C, int n)
      : state(tile), s1(tile + std::size_t(K) * n), s2(s1 + std::size_t(C) * n) {}
};

// rows x n block of a row-major matrix with leading dimension ld, to and from a dense tile
// (each leaves the barrier to the caller).
template <typename T, typename Exec>
GDN_HD void load(const Exec& ex, T* dst, const T* src, int rows, int n, std::int64_t ld) {
  for (int x = ex.tid(); x < rows * n; x += ex.nthreads()) dst[x] = src[(x / n) * ld + x % n];
}
template <typename T, typename Exec>
GDN_HD void store(const Exec& ex, T* dst, std::int64_t ld, const T* src, int rows, int n) {
  for (int x = ex.tid(); x < rows * n; x += ex.nthreads()) dst[(x / n) * ld + x % n] = src[x];
}
template <typename T, typename Exec>
GDN_HD void fill(const Exec& ex, T* dst, int count, T value) {
  for (int x = ex.tid(); x < count; x += ex.nthreads()) dst[x] = value;
}

// The job's (b, h) and columns.
struct Job {
  int bh, c0, n;
};
GDN_HD inline Job job_of(std::int64_t job, int width, int bv) {
  const int t = tiles(width, bv), bh = int(job / t), c0 = int(job % t) * bv;
  return {bh, c0, width - c0 < bv ? width - c0 : bv};
}

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
      store(ex, a.entry_state(j.bh, c) + c0, V, tl.state, K, n);
      math.step_cols(a.factors_of(j.bh, c), c0, n, tl.state, n, nullptr, 0, tl.s1);
    }
    if (s.ends && ht) store(ex, ht + a.state_offset(seq, hv) + c0, V, tl.state, K, n);
    ex.sync();  // the next segment or job overwrites the tile
  }
}

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
    if (keep) store(ex, a.exit_adjoint(j.bh, c) + j.c0, V, tl.state, a.K, n);
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
