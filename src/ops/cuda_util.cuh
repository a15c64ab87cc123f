// Helpers shared by the CUDA ops (the *_cuda.cu files of src/ops): launch geometry,
// stream-ordered scratch, and the deterministic reductions. Every kernel transcribes the
// loop of its op's host file: same formulas, same double intermediates. Layouts:
//  - element-wise ops: one element per thread, grid-stride loops;
//  - row reductions (the norms): one warp per row, a butterfly shuffle sum (every lane
//    gets the same bits); cross-entropy: one block per row, a shared-memory tree;
//  - parameter gradients summed over rows (dw of the norms and the conv, dA_log and
//    dt_bias): per column, partial sums over fixed blocks of kRowBlock rows (rows in order),
//    then the blocks in order, added once to the gradient. No atomics anywhere, so the
//    bits depend on the shapes only.
// Everything runs on the legacy default stream, in call order.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/hd.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn::ops::cuda_util {

using i64 = std::int64_t;

constexpr int kThreads = 256;        // threads per block (a power of two: the tree sums)
constexpr int kWarp = 32;            // threads per row in the warp-per-row kernels
constexpr i64 kMaxBlocks = 1 << 16;  // grid cap; every kernel loops grid-stride
constexpr i64 kRowBlock = 256;       // rows per partial sum of a parameter gradient
constexpr int kSumBlocks = 1024;     // most partials of sum_squares' first pass

inline int blocks_for(i64 work, i64 per_block = kThreads) {
  return int(std::min<i64>((work + per_block - 1) / per_block, kMaxBlocks));
}

inline void check_launch() {
  GDN_CUDA_CHECK(cudaGetLastError());
}

// A stream-ordered device scratch array on the default stream (freed without a device
// synchronisation, unlike cudaFree).
template <typename T>
class Scratch {
 public:
  explicit Scratch(std::size_t n) {
    if (n > 0) GDN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p_), n * sizeof(T), 0));
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (p_) cudaFreeAsync(p_, 0);  // no throw from a destructor
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

// Device ids copied to the host (synchronises).
inline std::vector<std::int32_t> ids_to_host(const std::int32_t* ids, i64 N) {
  std::vector<std::int32_t> h(static_cast<std::size_t>(N));
  if (N > 0)
    GDN_CUDA_CHECK(
        cudaMemcpy(h.data(), ids, std::size_t(N) * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  return h;
}

inline void check_tokens(const std::vector<std::int32_t>& tokens, int vocab) {
  for (std::size_t i = 0; i < tokens.size(); ++i)
    GDN_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "token id ", tokens[i], " at row ", i,
              " is out of range [0, ", vocab, ")");
}

// ---------------------------------------------------------------------------------------
// Device helpers

__device__ inline i64 thread_index() {
  return blockIdx.x * i64(blockDim.x) + threadIdx.x;
}
__device__ inline i64 thread_stride() {
  return i64(gridDim.x) * blockDim.x;
}

// 16 bytes from global to shared memory without passing through registers (cp.async.cg,
// sm_80 on; both addresses 16-byte aligned), in commit groups: async_wait<N>() returns
// when at most N of this thread's newest groups are still in flight.
__device__ inline void copy16_async(void* dst, const void* src) {
  const auto to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(src) : "memory");
}
__device__ inline void async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ inline void async_wait_all() {  // commits what is pending, then waits for it all
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
template <int N>
__device__ inline void async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ inline double sigmoid_d(double x) {
  return 1.0 / (1.0 + ::exp(-x));
}
// In T, as the host's swiglu does.
template <typename T>
__device__ inline T sigmoid_t(T x) {
  return T(1) / (T(1) + hd::exp(-x));
}
__device__ inline double softplus_d(double x) {
  return x > 20.0 ? x : ::log1p(::exp(x));
}

// Sum over the 32 lanes; the butterfly leaves the same bits in every lane (each pair is
// added in both lanes, and a + b == b + a).
template <typename V>
__device__ inline V warp_sum(V v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The dot product a . b of two rows of d elements by the lanes of one warp (the warp-per-row
// kernels, GDN_FOR_EACH_WARP_ROW): lane-strided partial sums in Acc, then warp_sum, so
// every lane gets the same bits.
template <typename Acc = double, typename T>
__device__ inline Acc warp_row_dot(const T* a, const T* b, int d, int lane) {
  Acc s = 0;
  for (int c = lane; c < d; c += kWarp) s += Acc(a[c]) * Acc(b[c]);
  return warp_sum(s);
}

struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct MaxOp {
  __device__ double operator()(double a, double b) const { return ::fmax(a, b); }
};

// Tree reduction over the block (blockDim.x a power of two), result in every thread.
// Called by all threads of the block; red holds blockDim.x doubles.
template <class Op>
__device__ double block_reduce(double v, double* red, Op op) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = op(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const double r = red[0];
  __syncthreads();  // red may be reused right away
  return r;
}

// ---------------------------------------------------------------------------------------
// Column sums over rows: out += sum_i f(i, c) for c in [0, cols), deterministic.
// F provides `double operator()(i64 row, int col)` and `void add(int col, double sum)`.

template <class F>
__global__ void colsum_partial_kernel(F f, i64 rows, int cols, i64 blocks, double* part) {
  for (i64 k = thread_index(); k < blocks * cols; k += thread_stride()) {
    const i64 blk = k / cols;
    const int c = int(k % cols);
    const i64 r1 = (blk + 1) * kRowBlock < rows ? (blk + 1) * kRowBlock : rows;
    double acc = 0;
    for (i64 i = blk * kRowBlock; i < r1; ++i) acc += f(i, c);
    part[k] = acc;
  }
}

template <class F>
__global__ void colsum_finish_kernel(F f, int cols, i64 blocks, const double* part) {
  for (i64 c = thread_index(); c < cols; c += thread_stride()) {
    double s = 0;
    for (i64 blk = 0; blk < blocks; ++blk) s += part[blk * cols + c];
    f.add(int(c), s);
  }
}

template <class F>
void column_sums(const F& f, i64 rows, int cols) {
  if (rows <= 0 || cols <= 0) return;  // nothing to add
  const i64 blocks = (rows + kRowBlock - 1) / kRowBlock;
  Scratch<double> part{std::size_t(blocks * cols)};
  colsum_partial_kernel<F>
      <<<blocks_for(blocks * cols), kThreads>>>(f, rows, cols, blocks, part.get());
  check_launch();
  colsum_finish_kernel<F><<<blocks_for(cols), kThreads>>>(f, cols, blocks, part.get());
  check_launch();
}

// Loops `row` over [0, N), one warp per row; lane is the thread's index in its warp.
#define GDN_FOR_EACH_WARP_ROW(row, lane, N)  \
  const int lane = int(threadIdx.x) % kWarp; \
  for (i64 row = thread_index() / kWarp; row < (N); row += thread_stride() / kWarp)

inline int row_blocks(i64 N) {
  return blocks_for(N, kThreads / kWarp);
}

}  // namespace gdn::ops::cuda_util
