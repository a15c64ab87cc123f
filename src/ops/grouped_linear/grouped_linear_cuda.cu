// The grouped expert linears on the GPU: the bf16 mode's float on cuBLAS (grouped_library.h)
// unless the tile is chosen; else one launch per call for all experts. Each block
// computes one 64 x 64 tile of the output. The forward and dx run over row tiles (their
// expert from grouped_tiles.h's schedule) x column tiles; dW_e over (out, in) tiles x
// experts, summing the expert's rows in order. In the bf16 mode a float tile is the bf16
// tensor-core block GEMM (mma_bf16.cuh); otherwise SIMT in T, so fp64 stays fp64.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "core/profile.h"
#include "ops/cuda_util.cuh"
#include "ops/grouped_linear/grouped_library.h"
#include "ops/grouped_linear/grouped_linear.h"
#include "ops/grouped_linear/grouped_tiles.h"
#include "ops/mma/mma_bf16.cuh"

namespace gdn::ops {

using namespace cuda_util;

namespace {

constexpr int kTile = grouped::kTileRows;  // output tiles are kTile x kTile
static_assert(kTile == mma::BlockTile::kM && kTile == mma::BlockTile::kN &&
              kThreads == mma::BlockTile::kThreads);

// C = op(A) op(B) (+ C when accumulate) for m, n <= 64, by the block's 256 threads in T.
// Thread (ty, tx) of a 16 x 16 grid owns rows ty + 16 a and columns tx + 16 b (a, b < 4):
// a warp reads two A values (broadcasts) and 16 consecutive B values per step. The k sum
// runs in order.
template <typename T>
struct SimtTile {
  static constexpr int kK = 16;  // k per staged slice
  __device__ static void run(bool ta, bool tb, int m, int n, int k, const T* A, int lda, const T* B,
                             int ldb, bool accumulate, T* C, int ldc) {
    __shared__ T As[kK][kTile + 1];  // As[p][i] = op(A)(i, p0 + p); +1: no bank conflicts
    __shared__ T Bs[kK][kTile + 1];  // Bs[p][j] = op(B)(p0 + p, j)
    const int tid = int(threadIdx.x), tx = tid % 16, ty = tid / 16;
    T acc[4][4] = {};
    for (int p0 = 0; p0 < k; p0 += kK) {
      // Consecutive threads read consecutive addresses, whichever way A and B lie.
      for (int x = tid; x < kK * kTile; x += kThreads) {
        const int ia = ta ? x % kTile : x / kK, pa = ta ? x / kTile : x % kK;
        const int jb = tb ? x / kK : x % kTile, pb = tb ? x % kK : x / kTile;
        const bool a_in = ia < m && p0 + pa < k, b_in = jb < n && p0 + pb < k;
        As[pa][ia] = a_in ? (ta ? A[i64(p0 + pa) * lda + ia] : A[i64(ia) * lda + p0 + pa]) : T(0);
        Bs[pb][jb] = b_in ? (tb ? B[i64(jb) * ldb + p0 + pb] : B[i64(p0 + pb) * ldb + jb]) : T(0);
      }
      __syncthreads();
      for (int p = 0; p < kK; ++p) {
        T a[4], b[4];
        for (int q = 0; q < 4; ++q) a[q] = As[p][ty + 16 * q], b[q] = Bs[p][tx + 16 * q];
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 4; ++c) acc[r][c] += a[r] * b[c];  // one fma (nvcc)
      }
      __syncthreads();  // the next slice overwrites As, Bs
    }
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) {
        const int i = ty + 16 * r, j = tx + 16 * c;
        if (i < m && j < n) {
          T& out = C[i64(i) * ldc + j];
          out = accumulate ? out + acc[r][c] : acc[r][c];
        }
      }
  }
};

// The same tile on the bf16 tensor cores, fp32 sums (block_gemm_bf16.h's order).
struct Bf16Tile {
  __device__ static void run(bool ta, bool tb, int m, int n, int k, const float* A, int lda,
                             const float* B, int ldb, bool accumulate, float* C, int ldc) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800  // tensor cores: sm_80 on; else SIMT
    // Bf16 has a member initialiser, which __shared__ forbids: raw storage.
    __shared__ __align__(16) std::uint16_t stage[mma::BlockTile::kStageElems];
    mma::bf16_block_gemm(reinterpret_cast<Bf16*>(stage), ta, tb, m, n, k, 1.0f, A, lda, B, ldb,
                         accumulate ? 1.0f : 0.0f, C, ldc, Structure::kDense);
#else
    SimtTile<float>::run(ta, tb, m, n, k, A, lda, B, ldb, accumulate, C, ldc);
#endif
  }
};

template <typename T, class Tile>
__device__ void run(const grouped::TileGemm<T>& g) {
  Tile::run(g.ta, g.tb, g.m, g.n, g.k, g.A, g.lda, g.B, g.ldb, g.accumulate, g.C, g.ldc);
}

// grouped_tiles.h's row kernels (the forward and dx).
template <typename T, class Tile>
__global__ void __launch_bounds__(kThreads)
    grouped_rows_kernel(const T* A, const T* W, i64 w_stride, const i64* offsets, int E, int kd,
                        int nd, bool tb, T* C, bool accumulate) {
  const grouped::TileGemm<T> g = grouped::rows_tile(blockIdx.x, int(blockIdx.y), A, W, w_stride,
                                                    offsets, E, kd, nd, tb, C, accumulate);
  if (g.m > 0) run<T, Tile>(g);  // m == 0: a spare tile, the whole block leaves
}

// grouped_tiles.h's dW kernel.
template <typename T, class Tile>
__global__ void __launch_bounds__(kThreads)
    grouped_dw_kernel(const T* x, const T* dy, const i64* offsets, int in, int out, i64 w_stride,
                      T* dW) {
  const grouped::TileGemm<T> g =
      grouped::dw_tile(int(blockIdx.x), int(blockIdx.y), x, dy, offsets, in, out, w_stride, dW);
  if (g.m > 0) run<T, Tile>(g);  // an expert with no rows adds nothing
}

template <typename T>
void launch_rows(Precision p, const T* A, const T* W, i64 w_stride, const i64* offsets, int E,
                 i64 R, int kd, int nd, bool tb, T* C, bool accumulate = false) {
  const dim3 grid(unsigned(grouped::num_row_tiles(R, E)), unsigned(grouped::col_tiles(nd)));
  if constexpr (std::is_same_v<T, float>) {
    if (p == Precision::bf16) {
      grouped_rows_kernel<float, Bf16Tile>
          <<<grid, kThreads>>>(A, W, w_stride, offsets, E, kd, nd, tb, C, accumulate);
      check_launch();
      return;
    }
  }
  grouped_rows_kernel<T, SimtTile<T>>
      <<<grid, kThreads>>>(A, W, w_stride, offsets, E, kd, nd, tb, C, accumulate);
  check_launch();
}

template <typename T>
void launch_dw(Precision p, const T* x, const T* dy, const i64* offsets, int E, int in, int out,
               i64 w_stride, T* dW) {
  const dim3 grid(unsigned(grouped::col_tiles(out) * grouped::col_tiles(in)), unsigned(E));
  if constexpr (std::is_same_v<T, float>) {
    if (p == Precision::bf16) {
      grouped_dw_kernel<float, Bf16Tile><<<grid, kThreads>>>(x, dy, offsets, in, out, w_stride, dW);
      check_launch();
      return;
    }
  }
  grouped_dw_kernel<T, SimtTile<T>><<<grid, kThreads>>>(x, dy, offsets, in, out, w_stride, dW);
  check_launch();
}

void check_shape(int E, i64 R, int in, int out, const char* what) {
  GDN_CHECK(E >= 1 && E <= 65535, what, ": ", E, " experts (1 to 65535: a grid dimension)");
  GDN_CHECK(R >= 0 && R <= INT_MAX && in >= 0 && out >= 0, what, ": ", R, " rows of ", in, " -> ",
            out, " (rows must fit an int)");
}

}  // namespace

template <typename T>
void grouped_linear_forward(Cuda, Precision p, const T* x, const T* W, i64 w_stride,
                            const i64* offsets, int E, i64 R, int in, int out, T* y) {
  const profile::Scope scope(profile::kGemm, profile::Charge::by_region);
  check_shape(E, R, in, out, "grouped_linear_forward");
  if (R == 0 || out == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (p == Precision::bf16 && in > 0 && grouped_kernel() == GroupedKernel::library)
      return grouped_library_forward(x, W, w_stride, offsets, E, R, in, out, y);
  }
  launch_rows(p, x, W, w_stride, offsets, E, R, in, out, true, y);  // in == 0: the tiles write 0
}

template <typename T>
void grouped_linear_backward(Cuda, Precision p, const T* x, const T* W, i64 w_stride, const T* dy,
                             const i64* offsets, int E, i64 R, int in, int out, T* dx, T* dW,
                             bool accumulate) {
  const profile::Scope scope(profile::kGemm, profile::Charge::by_region);
  check_shape(E, R, in, out, "grouped_linear_backward");
  if (R == 0 || in == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (p == Precision::bf16 && out > 0 && grouped_kernel() == GroupedKernel::library)
      return grouped_library_backward(x, W, w_stride, dy, offsets, E, R, in, out, dx, dW,
                                      accumulate);
  }
  if (dx) launch_rows(p, dy, W, w_stride, offsets, E, R, out, in, false, dx, accumulate);
  if (dW && out > 0) launch_dw(p, x, dy, offsets, E, in, out, w_stride, dW);
}

template void grouped_linear_forward(Cuda, Precision, const float*, const float*, i64, const i64*,
                                     int, i64, int, int, float*);
template void grouped_linear_forward(Cuda, Precision, const double*, const double*, i64, const i64*,
                                     int, i64, int, int, double*);
template void grouped_linear_backward(Cuda, Precision, const float*, const float*, i64,
                                      const float*, const i64*, int, i64, int, int, float*, float*,
                                      bool);
template void grouped_linear_backward(Cuda, Precision, const double*, const double*, i64,
                                      const double*, const i64*, int, i64, int, int, double*,
                                      double*, bool);

}  // namespace gdn::ops
