// The V-tiled sequential walks of the CUDA passes (local_pass_cuda.cu), one (batch * value
// head, column tile) job at a time: the parts they share. The walks themselves are
// state_walk/state_walk_tiled.h and adjoint_walk/adjoint_walk_tiled.h, written once
// against a ChunkKernel execution policy
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
#include "gdn/chunk/chunk_kernel.h"
#include "gdn/chunk/pass_args.h"

namespace gdn::walk {

// The walks' column width for bh = B Hv (batch, value head) pairs on `sms` multiprocessors:
// 64 where bh ceil(V / 64) blocks already fill them, else 32 (gdn/pass/local_pass_cuda.cu says
// why); and the register outputs' (outputs_bf16.h), whose tiles re-read the chunk's w, q_g
// and P: 64 where V allows.
GDN_HD inline int walk_width_for(std::int64_t bh, int V, int sms) {
  return bh * ((V + 63) / 64) >= sms ? 64 : 32;
}
GDN_HD inline int output_width(int V) {
  return V % 64 == 0 ? 64 : 32;
}

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
// A walked state kept for another pass (an entry state, an exit adjoint), as the register
// kernels keep it (kept_as_operand: bf16 in the bf16 mode, PassArgs::bf16_entry_state),
// so that every pass after reads the same values on either path.
template <typename T, typename Exec>
GDN_HD void store_kept(const Exec& ex, T* dst, std::int64_t ld, const T* src, int rows, int n) {
  for (int x = ex.tid(); x < rows * n; x += ex.nthreads())
    dst[(x / n) * ld + x % n] = kept_as_operand(ex, src[x]);
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

}  // namespace gdn::walk
