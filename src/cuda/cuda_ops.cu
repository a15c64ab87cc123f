// The per-token layers and the optimizer's element-wise pieces on the GPU (cuda_ops.h).
// Each kernel transcribes the matching loop of model/ops_dense.cpp, model/ops_gdn.cpp or
// train/optimizer.cpp: same formulas, same double intermediates. Layouts:
//  - element-wise ops: one element per thread, grid-stride loops;
//  - row reductions (the norms): one warp per row, a butterfly shuffle sum (every lane
//    gets the same bits); cross-entropy: one block per row, a shared-memory tree;
//  - parameter gradients summed over rows (dw of the norms and the conv, dA_log and
//    dt_bias): per column, partial sums over fixed blocks of kRowBlock rows (rows in order),
//    then the blocks in order, added once to the gradient. No atomics anywhere, so the
//    bits depend on the shapes only;
//  - the embedding gradient: rows grouped by token on the host (stable, so each token's
//    rows stay in order), one thread per (token, column) adding them in row order: the
//    same additions as the host loop, bit for bit.
// Scratch buffers are stream-ordered (cudaMallocAsync on the default stream).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_ops.h"
#include "gdn/hd.h"

namespace gdn::cuda_ops {

// ---------------------------------------------------------------------------------------
// The cuBLAS handle

CublasHandle::CublasHandle() {
  GDN_CUBLAS_CHECK(cublasCreate(&h_));
  const cublasStatus_t st = cublasSetMathMode(h_, CUBLAS_DEFAULT_MATH);
  if (st != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(h_);
    h_ = nullptr;
    GDN_CUBLAS_CHECK(st);
  }
}

CublasHandle::CublasHandle(CublasHandle&& o) noexcept : h_(o.h_) {
  o.h_ = nullptr;
}

CublasHandle& CublasHandle::operator=(CublasHandle&& o) noexcept {
  if (this != &o) {
    if (h_) cublasDestroy(h_);
    h_ = o.h_;
    o.h_ = nullptr;
  }
  return *this;
}

CublasHandle::~CublasHandle() {
  if (h_) cublasDestroy(h_);  // no throw from a destructor
}

namespace {

using i64 = std::int64_t;

constexpr int kThreads = 256;        // threads per block (a power of two: the tree sums)
constexpr int kWarp = 32;            // threads per row in the warp-per-row kernels
constexpr i64 kMaxBlocks = 1 << 16;  // grid cap; every kernel loops grid-stride
constexpr i64 kRowBlock = 256;       // rows per partial sum of a parameter gradient
constexpr int kSumBlocks = 1024;     // most partials of sum_squares' first pass

int blocks_for(i64 work, i64 per_block = kThreads) {
  return int(std::min<i64>((work + per_block - 1) / per_block, kMaxBlocks));
}

void check_launch() {
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
std::vector<std::int32_t> ids_to_host(const std::int32_t* ids, i64 N) {
  std::vector<std::int32_t> h(static_cast<std::size_t>(N));
  if (N > 0)
    GDN_CUDA_CHECK(
        cudaMemcpy(h.data(), ids, std::size_t(N) * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  return h;
}

void check_tokens(const std::vector<std::int32_t>& tokens, int vocab) {
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
__device__ inline double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
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

// ---------------------------------------------------------------------------------------
// Linear (cuBLAS, column-major: a row-major [r, c] array is a column-major [c, r] one)

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, float alpha, const float* A, int lda, const float* B, int ldb,
                    float beta, float* C, int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc);
}
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, double alpha, const double* A, int lda, const double* B, int ldb,
                    double beta, double* C, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc);
}

void check_rows(i64 N, const char* what) {
  GDN_CHECK(N >= 0 && N <= INT_MAX, what, ": ", N, " rows do not fit cuBLAS's int dimensions");
}

}  // namespace

template <typename T>
void linear_forward(cublasHandle_t h, const T* x, const T* W, i64 N, int in, int out, T* y) {
  check_rows(N, "linear_forward");
  if (N == 0 || out == 0) return;
  if (in == 0) {  // an empty sum: y = 0 (and cuBLAS wants ld >= 1)
    GDN_CUDA_CHECK(cudaMemset(y, 0, std::size_t(N) * out * sizeof(T)));
    return;
  }
  // y^T [out, N] = W [out, in] x^T [in, N]; W's buffer is W^T column-major (ld in).
  GDN_CUBLAS_CHECK(
      gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, int(N), in, T(1), W, in, x, in, T(0), y, out));
}

template <typename T>
void linear_backward(cublasHandle_t h, const T* x, const T* W, const T* dy, i64 N, int in, int out,
                     T* dx, T* dW) {
  check_rows(N, "linear_backward");
  if (dx && N > 0 && in > 0) {
    if (out == 0) {
      GDN_CUDA_CHECK(cudaMemset(dx, 0, std::size_t(N) * in * sizeof(T)));
    } else {
      // dx^T [in, N] = W^T [in, out] dy^T [out, N].
      GDN_CUBLAS_CHECK(
          gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, int(N), out, T(1), W, in, dy, out, T(0), dx, in));
    }
  }
  if (dW && N > 0 && in > 0 && out > 0) {
    // dW^T [in, out] += x^T [in, N] dy [N, out] (beta = 1: accumulate).
    GDN_CUBLAS_CHECK(
        gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, int(N), T(1), x, in, dy, out, T(1), dW, in));
  }
}

// ---------------------------------------------------------------------------------------
// Embedding

namespace {

template <typename T>
__global__ void embedding_forward_kernel(const std::int32_t* tokens, const T* E, i64 N, int d,
                                         T* y) {
  for (i64 k = thread_index(); k < N * d; k += thread_stride()) {
    const i64 i = k / d;
    const int c = int(k % d);
    y[k] = E[i64(tokens[i]) * d + c];
  }
}

// Token u of U distinct ones: rows[start[u] .. start[u + 1]) in ascending order.
template <typename T>
__global__ void embedding_backward_kernel(const i64* start, const i64* rows, const i64* tok, i64 U,
                                          const T* dy, int d, T* dE) {
  for (i64 k = thread_index(); k < U * d; k += thread_stride()) {
    const i64 u = k / d;
    const int c = int(k % d);
    T* e = dE + tok[u] * d + c;
    T acc = *e;
    for (i64 p = start[u]; p < start[u + 1]; ++p) acc += dy[rows[p] * d + c];
    *e = acc;
  }
}

}  // namespace

template <typename T>
void embedding_forward(const std::int32_t* tokens, const T* E, i64 N, int vocab, int d, T* y) {
  check_tokens(ids_to_host(tokens, N), vocab);
  if (N == 0 || d == 0) return;
  embedding_forward_kernel<T><<<blocks_for(N * d), kThreads>>>(tokens, E, N, d, y);
  check_launch();
}

template <typename T>
void embedding_backward(const std::int32_t* tokens, const T* dy, i64 N, int vocab, int d, T* dE) {
  const std::vector<std::int32_t> tok = ids_to_host(tokens, N);
  check_tokens(tok, vocab);
  if (N == 0 || d == 0) return;
  // Rows grouped by token, each group in row order (stable sort): one buffer holding
  // start [U + 1], rows [N], token [U].
  std::vector<i64> order(static_cast<std::size_t>(N));
  std::iota(order.begin(), order.end(), i64(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](i64 a, i64 b) { return tok[std::size_t(a)] < tok[std::size_t(b)]; });
  std::vector<i64> start, uniq;
  for (std::size_t p = 0; p < order.size(); ++p)
    if (p == 0 || tok[std::size_t(order[p])] != tok[std::size_t(order[p - 1])]) {
      start.push_back(i64(p));
      uniq.push_back(tok[std::size_t(order[p])]);
    }
  const i64 U = i64(uniq.size());
  start.push_back(N);
  std::vector<i64> packed;
  packed.reserve(start.size() + order.size() + uniq.size());
  packed.insert(packed.end(), start.begin(), start.end());
  packed.insert(packed.end(), order.begin(), order.end());
  packed.insert(packed.end(), uniq.begin(), uniq.end());
  Scratch<i64> dev{packed.size()};
  GDN_CUDA_CHECK(
      cudaMemcpy(dev.get(), packed.data(), packed.size() * sizeof(i64), cudaMemcpyHostToDevice));
  const i64* d_start = dev.get();
  const i64* d_rows = d_start + (U + 1);
  const i64* d_tok = d_rows + N;
  embedding_backward_kernel<T>
      <<<blocks_for(U * d), kThreads>>>(d_start, d_rows, d_tok, U, dy, d, dE);
  check_launch();
}

// ---------------------------------------------------------------------------------------
// RMSNorm (scale 1 + w) and gated RMSNorm (scale w silu(z)): one warp per row

namespace {

// Loops `row` over [0, N), one warp per row; lane is the thread's index in its warp.
#define GDN_FOR_EACH_WARP_ROW(row, lane, N)  \
  const int lane = int(threadIdx.x) % kWarp; \
  for (i64 row = thread_index() / kWarp; row < (N); row += thread_stride() / kWarp)

int row_blocks(i64 N) {
  return blocks_for(N, kThreads / kWarp);
}

template <typename T>
__global__ void rmsnorm_forward_kernel(const T* x, const T* w, i64 N, int d, double eps, T* y) {
  GDN_FOR_EACH_WARP_ROW(i, lane, N) {
    const T* xi = x + i * d;
    double s = 0;
    for (int j = lane; j < d; j += kWarp) s += double(xi[j]) * double(xi[j]);
    const double r = 1.0 / ::sqrt(warp_sum(s) / d + eps);
    for (int j = lane; j < d; j += kWarp)
      y[i * d + j] = T(double(xi[j]) * r * (1.0 + double(w[j])));
  }
}

// rs[i] = 1 / rms of row i (when rs is given); dx (when given) as the host.
template <typename T>
__global__ void rmsnorm_backward_rows_kernel(const T* x, const T* w, const T* dy, i64 N, int d,
                                             double eps, T* dx, double* rs) {
  GDN_FOR_EACH_WARP_ROW(i, lane, N) {
    const T *xi = x + i * d, *gi = dy + i * d;
    double s = 0, dot = 0;
    for (int j = lane; j < d; j += kWarp) {
      s += double(xi[j]) * double(xi[j]);
      dot += double(gi[j]) * (1.0 + double(w[j])) * double(xi[j]);
    }
    const double r = 1.0 / ::sqrt(warp_sum(s) / d + eps);
    dot = warp_sum(dot);
    if (rs && lane == 0) rs[i] = r;
    if (!dx) continue;
    const double c = r * r * r / d * dot;
    for (int j = lane; j < d; j += kWarp)
      dx[i * d + j] = T(r * (1.0 + double(w[j])) * double(gi[j]) - c * double(xi[j]));
  }
}

template <typename T>
struct RmsnormDw {
  const T *x, *dy;
  const double* rs;
  int d;
  T* dw;
  __device__ double operator()(i64 i, int c) const {
    return double(dy[i * d + c]) * double(x[i * d + c]) * rs[i];
  }
  __device__ void add(int c, double s) const { dw[c] += T(s); }
};

template <typename T>
__global__ void gated_rmsnorm_forward_kernel(const T* x, const T* z, const T* w, i64 N, int d,
                                             double eps, T* y) {
  GDN_FOR_EACH_WARP_ROW(i, lane, N) {
    const T* xi = x + i * d;
    double s = 0;
    for (int j = lane; j < d; j += kWarp) s += double(xi[j]) * double(xi[j]);
    const double r = 1.0 / ::sqrt(warp_sum(s) / d + eps);
    for (int j = lane; j < d; j += kWarp) {
      const double zj = z[i * d + j];
      const double silu = zj * sigmoid_d(zj);
      y[i * d + j] = T(double(xi[j]) * r * double(w[j]) * silu);
    }
  }
}

template <typename T>
__global__ void gated_rmsnorm_backward_rows_kernel(const T* x, const T* z, const T* w, const T* dy,
                                                   i64 N, int d, double eps, T* dx, T* dz,
                                                   double* rs) {
  GDN_FOR_EACH_WARP_ROW(i, lane, N) {
    const T *xi = x + i * d, *zi = z + i * d, *gi = dy + i * d;
    double ss = 0, dot = 0;
    for (int j = lane; j < d; j += kWarp) {
      ss += double(xi[j]) * double(xi[j]);
      const double zj = zi[j], sg = sigmoid_d(zj);
      dot += double(gi[j]) * (double(w[j]) * zj * sg) * double(xi[j]);
    }
    const double r = 1.0 / ::sqrt(warp_sum(ss) / d + eps);
    dot = warp_sum(dot);
    if (rs && lane == 0) rs[i] = r;
    const double c = r * r * r / d * dot;
    for (int j = lane; j < d; j += kWarp) {
      const double zj = zi[j], sg = sigmoid_d(zj);
      if (dz)
        dz[i * d + j] =
            T(double(gi[j]) * double(xi[j]) * r * double(w[j]) * sg * (1.0 + zj * (1.0 - sg)));
      if (dx) dx[i * d + j] = T(r * (double(w[j]) * zj * sg) * double(gi[j]) - c * double(xi[j]));
    }
  }
}

template <typename T>
struct GatedRmsnormDw {
  const T *x, *z, *dy;
  const double* rs;
  int d;
  T* dw;
  __device__ double operator()(i64 i, int c) const {
    const double zc = z[i * d + c];
    return double(dy[i * d + c]) * double(x[i * d + c]) * rs[i] * zc * sigmoid_d(zc);
  }
  __device__ void add(int c, double s) const { dw[c] += T(s); }
};

#undef GDN_FOR_EACH_WARP_ROW

}  // namespace

template <typename T>
void rmsnorm_forward(const T* x, const T* w, i64 N, int d, double eps, T* y) {
  if (N == 0 || d == 0) return;
  rmsnorm_forward_kernel<T><<<row_blocks(N), kThreads>>>(x, w, N, d, eps, y);
  check_launch();
}

template <typename T>
void rmsnorm_backward(const T* x, const T* w, const T* dy, i64 N, int d, double eps, T* dx, T* dw) {
  if (N == 0 || d == 0 || (!dx && !dw)) return;
  Scratch<double> rs{dw ? std::size_t(N) : 0};
  rmsnorm_backward_rows_kernel<T><<<row_blocks(N), kThreads>>>(x, w, dy, N, d, eps, dx, rs.get());
  check_launch();
  if (dw) column_sums(RmsnormDw<T>{x, dy, rs.get(), d, dw}, N, d);
}

template <typename T>
void gated_rmsnorm_forward(const T* x, const T* z, const T* w, i64 N, int d, double eps, T* y) {
  if (N == 0 || d == 0) return;
  gated_rmsnorm_forward_kernel<T><<<row_blocks(N), kThreads>>>(x, z, w, N, d, eps, y);
  check_launch();
}

template <typename T>
void gated_rmsnorm_backward(const T* x, const T* z, const T* w, const T* dy, i64 N, int d,
                            double eps, T* dx, T* dz, T* dw) {
  if (N == 0 || d == 0 || (!dx && !dz && !dw)) return;
  Scratch<double> rs{dw ? std::size_t(N) : 0};
  gated_rmsnorm_backward_rows_kernel<T>
      <<<row_blocks(N), kThreads>>>(x, z, w, dy, N, d, eps, dx, dz, rs.get());
  check_launch();
  if (dw) column_sums(GatedRmsnormDw<T>{x, z, dy, rs.get(), d, dw}, N, d);
}

// ---------------------------------------------------------------------------------------
// SwiGLU (in T, as the host)

namespace {

template <typename T>
__global__ void swiglu_forward_kernel(const T* g, const T* u, i64 n, T* y) {
  for (i64 i = thread_index(); i < n; i += thread_stride()) y[i] = g[i] * sigmoid_t(g[i]) * u[i];
}

template <typename T>
__global__ void swiglu_backward_kernel(const T* g, const T* u, const T* dy, i64 n, T* dg, T* du) {
  for (i64 i = thread_index(); i < n; i += thread_stride()) {
    const T sg = sigmoid_t(g[i]);
    if (dg) dg[i] = dy[i] * u[i] * sg * (T(1) + g[i] * (T(1) - sg));
    if (du) du[i] = dy[i] * g[i] * sg;
  }
}

}  // namespace

template <typename T>
void swiglu_forward(const T* g, const T* u, i64 n, T* y) {
  if (n == 0) return;
  swiglu_forward_kernel<T><<<blocks_for(n), kThreads>>>(g, u, n, y);
  check_launch();
}

template <typename T>
void swiglu_backward(const T* g, const T* u, const T* dy, i64 n, T* dg, T* du) {
  if (n == 0 || (!dg && !du)) return;
  swiglu_backward_kernel<T><<<blocks_for(n), kThreads>>>(g, u, dy, n, dg, du);
  check_launch();
}

// ---------------------------------------------------------------------------------------
// Causal depthwise conv1d + SiLU

namespace {

// Pre-activation at (b, t, c): sum_j w[c, j] x[b, t + j, c].
template <typename T>
__device__ inline double conv_pre(const T* x, const T* w, i64 b, i64 t, int c, i64 rows, int C,
                                  int W) {
  const T* xb = x + b * rows * C;
  double s = 0;
  for (int j = 0; j < W; ++j) s += double(w[c * W + j]) * double(xb[(t + j) * C + c]);
  return s;
}

template <typename T>
__global__ void conv_forward_kernel(const T* x, const T* w, int B, i64 T_len, int C, int W, T* y) {
  const i64 rows = T_len + W - 1;
  for (i64 k = thread_index(); k < B * T_len * C; k += thread_stride()) {
    const i64 bt = k / C;
    const int c = int(k % C);
    const double pre = conv_pre(x, w, bt / T_len, bt % T_len, c, rows, C, W);
    y[k] = T(pre * sigmoid_d(pre));
  }
}

// dpre = dy * silu'(pre), in double.
template <typename T>
__global__ void conv_dpre_kernel(const T* x, const T* w, const T* dy, int B, i64 T_len, int C,
                                 int W, double* dpre) {
  const i64 rows = T_len + W - 1;
  for (i64 k = thread_index(); k < B * T_len * C; k += thread_stride()) {
    const i64 bt = k / C;
    const int c = int(k % C);
    const double pre = conv_pre(x, w, bt / T_len, bt % T_len, c, rows, C, W);
    const double s = sigmoid_d(pre);
    dpre[k] = double(dy[k]) * s * (1.0 + pre * (1.0 - s));
  }
}

// Gather form: x row r of batch row b feeds outputs t = r - j.
template <typename T>
__global__ void conv_dx_kernel(const double* dpre, const T* w, int B, i64 T_len, int C, int W,
                               T* dx) {
  const i64 rows = T_len + W - 1;
  for (i64 k = thread_index(); k < B * rows * C; k += thread_stride()) {
    const i64 br = k / C;
    const int c = int(k % C);
    const i64 b = br / rows, r = br % rows;
    double s = 0;
    for (int j = 0; j < W; ++j) {
      const i64 t = r - j;
      if (t >= 0 && t < T_len) s += double(w[c * W + j]) * dpre[(b * T_len + t) * C + c];
    }
    dx[k] = T(s);
  }
}

// dw[c, j] += sum_{b, t} dpre[b, t, c] x[b, t + j, c]; column col = j C + c (adjacent
// threads read adjacent channels), row = b T + t.
template <typename T>
struct ConvDw {
  const double* dpre;
  const T* x;
  i64 T_len;
  int C, W;
  T* dw;
  __device__ double operator()(i64 bt, int col) const {
    const int j = col / C, c = col % C;
    const i64 b = bt / T_len, t = bt % T_len;
    return dpre[bt * C + c] * double(x[(b * (T_len + W - 1) + t + j) * C + c]);
  }
  __device__ void add(int col, double s) const {
    const int j = col / C, c = col % C;
    dw[c * W + j] += T(s);
  }
};

}  // namespace

template <typename T>
void causal_conv_silu_forward(const T* x, const T* w, int B, i64 T_len, int C, int W, T* y) {
  if (i64(B) * T_len * C == 0) return;
  conv_forward_kernel<T><<<blocks_for(B * T_len * C), kThreads>>>(x, w, B, T_len, C, W, y);
  check_launch();
}

template <typename T>
void causal_conv_silu_backward(const T* x, const T* w, const T* dy, int B, i64 T_len, int C, int W,
                               T* dx, T* dw) {
  if ((!dx && !dw) || i64(B) * C == 0) return;
  const i64 rows = T_len + W - 1;
  Scratch<double> dpre{std::size_t(B * T_len * C)};
  if (T_len > 0) {
    conv_dpre_kernel<T>
        <<<blocks_for(B * T_len * C), kThreads>>>(x, w, dy, B, T_len, C, W, dpre.get());
    check_launch();
  }
  if (dx && rows > 0) {
    conv_dx_kernel<T><<<blocks_for(B * rows * C), kThreads>>>(dpre.get(), w, B, T_len, C, W, dx);
    check_launch();
  }
  if (dw) column_sums(ConvDw<T>{dpre.get(), x, T_len, C, W, dw}, B * T_len, W * C);
}

// ---------------------------------------------------------------------------------------
// GDN gating

namespace {

template <typename T>
__global__ void gating_forward_kernel(const T* b, const T* a, const T* A_log, const T* dt_bias,
                                      i64 N, int H, T* beta, T* g) {
  for (i64 k = thread_index(); k < N * H; k += thread_stride()) {
    const int h = int(k % H);
    beta[k] = T(sigmoid_d(double(b[k])));
    g[k] = T(-::exp(double(A_log[h])) * softplus_d(double(a[k]) + double(dt_bias[h])));
  }
}

template <typename T>
__global__ void gating_backward_kernel(const T* b, const T* a, const T* A_log, const T* dt_bias,
                                       const T* dbeta, const T* dg, i64 N, int H, T* db, T* da) {
  for (i64 k = thread_index(); k < N * H; k += thread_stride()) {
    const int h = int(k % H);
    if (db) {
      const double s = sigmoid_d(double(b[k]));
      db[k] = T(double(dbeta[k]) * s * (1.0 - s));
    }
    if (da) {
      const double x = double(a[k]) + double(dt_bias[h]), e = ::exp(double(A_log[h]));
      da[k] = T(double(dg[k]) * -e * sigmoid_d(x));
    }
  }
}

// Columns [0, H): dA_log; [H, 2H): ddt_bias. Rows are tokens.
template <typename T>
struct GatingDparams {
  const T *a, *A_log, *dt_bias, *dg;
  int H;
  T *dA_log, *ddt_bias;
  __device__ double operator()(i64 i, int col) const {
    const int h = col < H ? col : col - H;
    const i64 k = i * H + h;
    const double x = double(a[k]) + double(dt_bias[h]), e = ::exp(double(A_log[h]));
    return col < H ? double(dg[k]) * -e * softplus_d(x) : double(dg[k]) * -e * sigmoid_d(x);
  }
  __device__ void add(int col, double s) const {
    if (col < H) {
      if (dA_log) dA_log[col] += T(s);
    } else if (ddt_bias) {
      ddt_bias[col - H] += T(s);
    }
  }
};

}  // namespace

template <typename T>
void gdn_gating_forward(const T* b, const T* a, const T* A_log, const T* dt_bias, i64 N, int H,
                        T* beta, T* g) {
  if (N * H == 0) return;
  gating_forward_kernel<T><<<blocks_for(N * H), kThreads>>>(b, a, A_log, dt_bias, N, H, beta, g);
  check_launch();
}

template <typename T>
void gdn_gating_backward(const T* b, const T* a, const T* A_log, const T* dt_bias, const T* dbeta,
                         const T* dg, i64 N, int H, T* db, T* da, T* dA_log, T* ddt_bias) {
  if (N * H == 0) return;
  if (db || da) {
    gating_backward_kernel<T>
        <<<blocks_for(N * H), kThreads>>>(b, a, A_log, dt_bias, dbeta, dg, N, H, db, da);
    check_launch();
  }
  if (dA_log || ddt_bias)
    column_sums(GatingDparams<T>{a, A_log, dt_bias, dg, H, dA_log, ddt_bias}, N, 2 * H);
}

// ---------------------------------------------------------------------------------------
// Cross-entropy: one block per row

namespace {

template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const std::int32_t* targets, i64 N, int V,
                                     double grad_scale, T* dlogits, double* row_loss) {
  __shared__ double red[kThreads];
  for (i64 i = blockIdx.x; i < N; i += gridDim.x) {
    const T* l = logits + i * V;
    double mx = -INFINITY;
    for (int j = int(threadIdx.x); j < V; j += int(blockDim.x)) mx = ::fmax(mx, double(l[j]));
    mx = block_reduce(mx, red, MaxOp{});
    double s = 0;
    for (int j = int(threadIdx.x); j < V; j += int(blockDim.x)) s += ::exp(double(l[j]) - mx);
    s = block_reduce(s, red, SumOp{});
    const double lse = mx + ::log(s);
    const int t = targets[i];
    if (threadIdx.x == 0) row_loss[i] = lse - double(l[t]);
    // The model computes dlogits in place (dlogits == logits): thread 0 must read l[t]
    // before any thread overwrites it.
    __syncthreads();
    if (!dlogits) continue;
    T* dl = dlogits + i * V;
    for (int j = int(threadIdx.x); j < V; j += int(blockDim.x)) {
      const T p = T(::exp(double(l[j]) - lse) * grad_scale);
      dl[j] = j == t ? T(double(p) - grad_scale) : p;
    }
  }
}

}  // namespace

template <typename T>
double cross_entropy(const T* logits, const std::int32_t* targets, i64 N, int V, double grad_scale,
                     T* dlogits) {
  const std::vector<std::int32_t> tgt = ids_to_host(targets, N);
  for (std::size_t i = 0; i < tgt.size(); ++i)
    GDN_CHECK(tgt[i] >= 0 && tgt[i] < V, "cross_entropy: target ", tgt[i], " at row ", i,
              " is out of range [0, ", V, ")");
  if (N == 0) return 0.0;
  Scratch<double> row_loss{std::size_t(N)};
  cross_entropy_kernel<T><<<int(std::min<i64>(N, kMaxBlocks)), kThreads>>>(
      logits, targets, N, V, grad_scale, dlogits, row_loss.get());
  check_launch();
  std::vector<double> h(static_cast<std::size_t>(N));
  GDN_CUDA_CHECK(
      cudaMemcpy(h.data(), row_loss.get(), h.size() * sizeof(double), cudaMemcpyDeviceToHost));
  double total = 0;  // serially in row order, as the host does
  for (double v : h) total += v;
  return total;
}

// ---------------------------------------------------------------------------------------
// Optimizer pieces

namespace {

template <typename T>
__global__ void adamw_kernel(T* p, const T* g, T* m, T* v, i64 n, double lr, double b1, double b2,
                             double eps, double keep, double bc1, double bc2) {
  for (i64 e = thread_index(); e < n; e += thread_stride()) {
    const double gd = double(g[e]);
    const double me = b1 * double(m[e]) + (1.0 - b1) * gd;
    const double ve = b2 * double(v[e]) + (1.0 - b2) * gd * gd;
    m[e] = T(me);
    v[e] = T(ve);
    const double update = (me / bc1) / (::sqrt(ve / bc2) + eps);
    p[e] = T(double(p[e]) * keep - lr * update);
  }
}

// Per block: sum of squares over a grid-stride slice (the grid size depends on n only).
template <typename T>
__global__ void sum_squares_partial_kernel(const T* g, i64 n, double* part) {
  __shared__ double red[kThreads];
  double s = 0;
  for (i64 e = thread_index(); e < n; e += thread_stride()) s += double(g[e]) * double(g[e]);
  s = block_reduce(s, red, SumOp{});
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(const double* part, int count, double* out) {
  __shared__ double red[kThreads];
  double s = 0;
  for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) s += part[i];
  s = block_reduce(s, red, SumOp{});
  if (threadIdx.x == 0) *out = s;
}

template <typename T>
__global__ void scale_kernel(T* g, i64 n, double s) {
  for (i64 e = thread_index(); e < n; e += thread_stride()) g[e] = T(double(g[e]) * s);
}

}  // namespace

template <typename T>
void adamw_update(T* p, const T* g, T* m, T* v, i64 n, double lr, double beta1, double beta2,
                  double eps, double wd, i64 step) {
  if (n == 0) return;
  // As AdamW<T>::step: bias corrections on the host with std::pow, keep = 1 - lr * wd.
  const double bc1 = 1.0 - std::pow(beta1, double(step + 1));
  const double bc2 = 1.0 - std::pow(beta2, double(step + 1));
  const double keep = 1.0 - lr * wd;
  adamw_kernel<T>
      <<<blocks_for(n), kThreads>>>(p, g, m, v, n, lr, beta1, beta2, eps, keep, bc1, bc2);
  check_launch();
}

template <typename T>
double sum_squares(const T* g, i64 n) {
  if (n == 0) return 0.0;
  const int blocks = int(std::min<i64>((n + kThreads - 1) / kThreads, kSumBlocks));
  Scratch<double> part{std::size_t(blocks) + 1};
  sum_squares_partial_kernel<T><<<blocks, kThreads>>>(g, n, part.get());
  check_launch();
  sum_partials_kernel<<<1, kThreads>>>(part.get(), blocks, part.get() + blocks);
  check_launch();
  double s = 0;
  GDN_CUDA_CHECK(cudaMemcpy(&s, part.get() + blocks, sizeof(double), cudaMemcpyDeviceToHost));
  return s;
}

template <typename T>
void scale(T* g, i64 n, double s) {
  if (n == 0) return;
  scale_kernel<T><<<blocks_for(n), kThreads>>>(g, n, s);
  check_launch();
}

// ---------------------------------------------------------------------------------------

#define GDN_CUDA_OPS_INSTANTIATE(T)                                                                \
  template void linear_forward<T>(cublasHandle_t, const T*, const T*, i64, int, int, T*);          \
  template void linear_backward<T>(cublasHandle_t, const T*, const T*, const T*, i64, int, int,    \
                                   T*, T*);                                                        \
  template void embedding_forward<T>(const std::int32_t*, const T*, i64, int, int, T*);            \
  template void embedding_backward<T>(const std::int32_t*, const T*, i64, int, int, T*);           \
  template void rmsnorm_forward<T>(const T*, const T*, i64, int, double, T*);                      \
  template void rmsnorm_backward<T>(const T*, const T*, const T*, i64, int, double, T*, T*);       \
  template void gated_rmsnorm_forward<T>(const T*, const T*, const T*, i64, int, double, T*);      \
  template void gated_rmsnorm_backward<T>(const T*, const T*, const T*, const T*, i64, int,        \
                                          double, T*, T*, T*);                                     \
  template void swiglu_forward<T>(const T*, const T*, i64, T*);                                    \
  template void swiglu_backward<T>(const T*, const T*, const T*, i64, T*, T*);                     \
  template void causal_conv_silu_forward<T>(const T*, const T*, int, i64, int, int, T*);           \
  template void causal_conv_silu_backward<T>(const T*, const T*, const T*, int, i64, int, int, T*, \
                                             T*);                                                  \
  template void gdn_gating_forward<T>(const T*, const T*, const T*, const T*, i64, int, T*, T*);   \
  template void gdn_gating_backward<T>(const T*, const T*, const T*, const T*, const T*, const T*, \
                                       i64, int, T*, T*, T*, T*);                                  \
  template double cross_entropy<T>(const T*, const std::int32_t*, i64, int, double, T*);           \
  template void adamw_update<T>(T*, const T*, T*, T*, i64, double, double, double, double, double, \
                                i64);                                                              \
  template double sum_squares<T>(const T*, i64);                                                   \
  template void scale<T>(T*, i64, double);

GDN_CUDA_OPS_INSTANTIATE(float)
GDN_CUDA_OPS_INSTANTIATE(double)

}  // namespace gdn::cuda_ops
