// MoE routing on the GPU, with no host round trip. moe_route is a counting sort in two
// launches: a histogram of the experts (shared-memory atomics: integer counts, so the
// result does not depend on their order), then one block per expert that finds its offset
// (the counts before it) and walks the entries in order, placing its own with a
// block-wide prefix sum: the host's stable order, every position written once. Each block
// reads all N k ids, which L2 serves (E <= a few hundred blocks of a few MB at most).
// moe_combine: one block per token adds its k rows in position order, as the host does.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "core/profile.h"
#include "ops/cuda_util.cuh"
#include "ops/moe_route/moe_route.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

constexpr int kPerThread = 16;                 // consecutive entries per thread and round
constexpr int kRound = kThreads * kPerThread;  // entries a block places per round
constexpr int kWarps = kThreads / kWarp;
constexpr int kHistBlocks = 264;  // histogram blocks: each adds its E counts to the total once
using u64 = unsigned long long;

__global__ void count_kernel(const std::int32_t* idx, i64 R, int E, u64* counts) {
  extern __shared__ unsigned hist[];  // E counters
  for (int e = int(threadIdx.x); e < E; e += kThreads) hist[e] = 0;
  __syncthreads();
  for (i64 i = thread_index(); i < R; i += thread_stride()) {
    const int e = idx[i];
    if (e < 0 || e >= E) {  // a broken router: stop the step rather than lose the row
      printf("moe_route: the router chose expert %d of %d (entry %lld)\n", e, E, i);
      __trap();
    }
    atomicAdd(&hist[e], 1u);
  }
  __syncthreads();
  for (int e = int(threadIdx.x); e < E; e += kThreads)
    if (hist[e] != 0) atomicAdd(&counts[e], u64(hist[e]));
}

// The exclusive prefix sum of v over the block's threads, and the block's total. Every
// thread calls it; tot holds kWarps ints.
__device__ int block_exclusive_scan(int v, int* tot, int& total) {
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  int x = v;  // the inclusive scan within the warp
  for (int o = 1; o < kWarp; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == kWarp - 1) tot[warp] = x;
  __syncthreads();
  int before = 0;
  total = 0;
  for (int w = 0; w < kWarps; ++w) {
    before += w < warp ? tot[w] : 0;
    total += tot[w];
  }
  __syncthreads();  // tot is rewritten by the next call
  return before + x - v;
}

__global__ void place_kernel(const std::int32_t* idx, i64 R, int k, int E, const u64* counts,
                             i64* offsets, i64* rows, i64* choice, i64* slot) {
  __shared__ int tot[kWarps];
  __shared__ u64 sums[kWarps];
  const int e = int(blockIdx.x), lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  // The offset of expert e: the counts before it.
  u64 part = 0;
  for (int f = int(threadIdx.x); f < e; f += kThreads) part += counts[f];
  for (int o = kWarp / 2; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
  if (lane == 0) sums[warp] = part;
  __syncthreads();
  i64 at = 0;
  for (int w = 0; w < kWarps; ++w) at += i64(sums[w]);
  if (threadIdx.x == 0) {
    offsets[e] = at;
    if (e == E - 1) offsets[E] = at + i64(counts[e]);
  }
  // Rounds of kRound entries in order; thread t takes kPerThread consecutive ones.
  for (i64 r0 = 0; r0 < R; r0 += kRound) {
    const i64 i0 = r0 + i64(threadIdx.x) * kPerThread;
    int mine = 0;
    for (int q = 0; q < kPerThread; ++q) mine += i0 + q < R && idx[i0 + q] == e;
    int total = 0;
    i64 pos = at + block_exclusive_scan(mine, tot, total);
    for (int q = 0; q < kPerThread && mine > 0; ++q)
      if (i0 + q < R && idx[i0 + q] == e) {
        rows[pos] = (i0 + q) / k;
        choice[pos] = i0 + q;
        slot[i0 + q] = pos++;
        --mine;
      }
    at += total;
  }
}

// y[n] += scale[s] src[s] for token n's positions s in increasing order, one block a token.
template <typename T>
__global__ void combine_kernel(const T* src, const i64* slot, const T* scale, i64 N, int k, int d,
                               T* y) {
  extern __shared__ i64 at[];  // the token's k positions, sorted
  for (i64 n = blockIdx.x; n < N; n += gridDim.x) {
    if (threadIdx.x == 0) {  // insertion sort: k is small
      for (int j = 0; j < k; ++j) {
        const i64 s = slot[n * k + j];
        int i = j;
        for (; i > 0 && at[i - 1] > s; --i) at[i] = at[i - 1];
        at[i] = s;
      }
    }
    __syncthreads();
    for (int c = int(threadIdx.x); c < d; c += kThreads) {
      T v = y[n * d + c];
      for (int j = 0; j < k; ++j) v += (scale ? scale[at[j]] : T(1)) * src[at[j] * d + c];
      y[n * d + c] = v;
    }
    __syncthreads();  // at is rewritten for the next token
  }
}

__global__ void count_stats_kernel(const i64* offsets, int E, double* stats) {
  for (i64 e = thread_index(); e < E; e += thread_stride())
    stats[e] = double(offsets[e + 1] - offsets[e]);
}

// stats[E + e] = sum of probs[n, e] over n (cuda_util::column_sums's F).
template <typename T>
struct ProbSums {
  const T* probs;
  int E;
  double* stats;
  __device__ double operator()(i64 n, int e) const { return double(probs[n * E + e]); }
  __device__ void add(int e, double s) const { stats[E + e] = s; }
};

}  // namespace

void moe_route(Cuda, const std::int32_t* idx, i64 N, int k, int E, i64* offsets, i64* rows,
               i64* choice, i64* slot) {
  const profile::Scope scope("dispatch", profile::Charge::by_region);
  GDN_CHECK(E >= 1 && k >= 1 && N >= 0, "moe_route: ", N, " tokens, top-", k, " of ", E);
  const std::size_t hist_bytes = std::size_t(E) * sizeof(unsigned);
  GDN_CHECK(hist_bytes <= 48 * 1024, "moe_route: ", E, " experts exceed the shared histogram");
  const i64 R = N * k;
  Scratch<u64> counts{std::size_t(E)};
  GDN_CUDA_CHECK(cudaMemsetAsync(counts.get(), 0, std::size_t(E) * sizeof(u64), 0));
  if (R > 0) {
    count_kernel<<<std::min(blocks_for(R), kHistBlocks), kThreads, hist_bytes>>>(idx, R, E,
                                                                                 counts.get());
    check_launch();
  }
  place_kernel<<<E, kThreads>>>(idx, R, k, E, counts.get(), offsets, rows, choice, slot);
  check_launch();
}

template <typename T>
void moe_combine(Cuda, const T* src, const i64* slot, const T* scale, i64 N, int k, int d, T* y) {
  const profile::Scope scope("dispatch", profile::Charge::by_region);
  GDN_CHECK(k >= 1 && std::size_t(k) * sizeof(i64) <= 48 * 1024, "moe_combine: top-", k);
  if (N == 0 || d == 0) return;
  combine_kernel<T><<<int(std::min<i64>(N, kMaxBlocks)), kThreads, std::size_t(k) * sizeof(i64)>>>(
      src, slot, scale, N, k, d, y);
  check_launch();
}

template <typename T>
void router_stats(Cuda, const T* probs, const i64* offsets, i64 N, int E, double* stats) {
  GDN_CUDA_CHECK(cudaMemsetAsync(stats + E, 0, std::size_t(E) * sizeof(double), 0));
  count_stats_kernel<<<blocks_for(E), kThreads>>>(offsets, E, stats);
  check_launch();
  column_sums(ProbSums<T>{probs, E, stats}, N, E);
}

template void moe_combine(Cuda, const float*, const i64*, const float*, i64, int, int, float*);
template void moe_combine(Cuda, const double*, const i64*, const double*, i64, int, int, double*);
template void router_stats(Cuda, const float*, const i64*, i64, int, double*);
template void router_stats(Cuda, const double*, const i64*, i64, int, double*);

}  // namespace gdn::ops
