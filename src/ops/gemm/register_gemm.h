// The register-tile GEMM (gemm.h's contract), included once per ISA by the files that
// build the kernel tables (gemm_kernels.h). Everything here has internal linkage, so each
// ISA gets its own copy. C is cut into panels of one or two vectors of columns and each
// panel into tiles of up to kTileRows rows; a tile's accumulators stay in registers over the
// whole reduction (up to 2 kTileRows independent FMA chains: enough to cover the FMA latency
// at full throughput), reading one row of the B panel (one or two vector loads) and one
// element of each A row (a broadcast) per step.
//
// op(B) is read in place when its panel is a full-width slice of row-major rows; a
// transposed B, or the narrower last panel, is packed into a k x width block first (so the
// micro-kernel always reads contiguous vectors). op(A) is never packed: the kernel reads A
// through a row and a column stride, which covers A and A^T alike.
//
// Structure (structure.h): a triangular op(A) shortens each tile's reduction to the terms
// that can be nonzero in its rows; a lower-triangular C skips the tiles that lie wholly
// above the diagonal.
//
// No standard-library calls (gemm_kernels.h says why): min, fills and copies are loops.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/gemm/gemm_kernels.h"
#include "ops/gemm/simd.h"

namespace gdn::la {

namespace {

using simd::Vec;
using std::ptrdiff_t;

// Rows of C per register tile: 2 kTileRows accumulators, two B vectors and a broadcast
// must fit in the register file (8 rows of two vectors: 19 of AVX-512's 32; 6: 15 of
// AVX2's 16).
constexpr int kTileRows = simd::kVecRegs >= 32 ? 8 : 6;

constexpr int min_of(int a, int b) {
  return a < b ? a : b;
}

// acc[r][h] = sum_{p in [p0, p1)} A(r, p) * Bp[p][h L .. h L + L), A(r, p) = A[r rs + p cs].
// Then C(r, h L + j) = beta C + alpha acc for the first `cols` columns.
template <typename T, int R, int NV>
void tile(int p0, int p1, const T* A, ptrdiff_t rs, ptrdiff_t cs, const T* B, ptrdiff_t ldb,
          int cols, T alpha, T beta, T* C, ptrdiff_t ldc) {
  constexpr int L = simd::kLanes<T>;
  Vec<T> acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int h = 0; h < NV; ++h) acc[r][h] = Vec<T>{};
  for (int p = p0; p < p1; ++p) {
    Vec<T> b[NV];
#pragma GCC unroll 2
    for (int h = 0; h < NV; ++h) b[h] = simd::load(B + p * ldb + h * L);
    const T* a = A + p * cs;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Vec<T> ar = simd::broadcast(a[r * rs]);
#pragma GCC unroll 2
      for (int h = 0; h < NV; ++h) acc[r][h] = simd::fmadd(ar, b[h], acc[r][h]);
    }
  }
  const Vec<T> va = simd::broadcast(alpha), vb = simd::broadcast(beta);
  for (int r = 0; r < R; ++r) {
    T* c = C + r * ldc;
    if (cols == NV * L) {
#pragma GCC unroll 2
      for (int h = 0; h < NV; ++h) {
        const Vec<T> x = va * acc[r][h];
        simd::store(c + h * L, beta == T(0)   ? x
                               : beta == T(1) ? simd::load<T>(c + h * L) + x
                                              : vb * simd::load<T>(c + h * L) + x);
      }
    } else {  // a narrow last panel: the same arithmetic, lane by lane
      T tmp[NV * L];
      for (int h = 0; h < NV; ++h) simd::store(tmp + h * L, va * acc[r][h]);
      for (int j = 0; j < cols; ++j)
        c[j] = beta == T(0) ? tmp[j] : beta == T(1) ? c[j] + tmp[j] : beta * c[j] + tmp[j];
    }
  }
}

// The last tile of for_row_tiles: tile.operator()<R>(i) with R = rows (< kTileRows), found
// by counting R down (a template argument: the register tile's size).
template <int R, typename Tile>
void tail_tile(int rows, int i, Tile& tile) {
  if constexpr (R > 0) {
    if (rows == R) return tile.template operator()<R>(i);
    tail_tile<R - 1>(rows, i, tile);
  }
}

// tile.operator()<R>(i) for the tiles of m rows: kTileRows rows at a time, then one
// shorter tile for the last rows.
template <typename Tile>
void for_row_tiles(int m, Tile&& tile) {
  int i = 0;
  for (; i + kTileRows <= m; i += kTileRows) tile.template operator()<kTileRows>(i);
  tail_tile<kTileRows - 1>(m - i, i, tile);
}

// What one GEMM call shares with all its tiles.
template <typename T>
struct Call {
  int m, k;
  const T* A;
  ptrdiff_t rs, cs;
  T alpha, beta;
  T* C;
  ptrdiff_t ldc;
  Structure s;
};

// Tile of R rows at row i of the panel at column j0 (B: the panel, row stride ldb).
template <typename T, int R, int NV>
void tile_at(const Call<T>& c, int i, int j0, const T* B, ptrdiff_t ldb, int cols) {
  int p0 = 0, p1 = c.k;
  if (c.s == Structure::kLowerA) p1 = min_of(c.k, i + R);
  if (c.s == Structure::kUpperA) p0 = min_of(c.k, i);
  if (c.s == Structure::kLowerC && j0 > i + R - 1) return;  // wholly above the diagonal
  tile<T, R, NV>(p0, p1, c.A + i * c.rs, c.rs, c.cs, B, ldb, cols, c.alpha, c.beta,
                 c.C + i * c.ldc + j0, c.ldc);
}

// One panel of C (all m rows, `cols` columns at j0).
template <typename T, int NV>
void panel(const Call<T>& c, int j0, const T* B, ptrdiff_t ldb, int cols) {
  for_row_tiles(c.m, [&]<int R>(int i) { tile_at<T, R, NV>(c, i, j0, B, ldb, cols); });
}

#if defined(__AVX512F__)
// dst[p * ld + j] = src[j * ls + p] for a 16 x 16 block of floats: the textbook AVX-512
// transpose (32-bit, 64-bit and 128-bit interleaves), written as vector shuffles (the
// intrinsics trip GCC 12's -Wuninitialized on _mm512_undefined_ps).
inline void transpose16(const float* src, ptrdiff_t ls, float* dst, ptrdiff_t ld) {
  using V = Vec<float>;
  V r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = simd::load(src + i * ls);
  for (int i = 0; i < 8; ++i) {  // unpacklo_ps / unpackhi_ps
    const V a = r[2 * i], b = r[2 * i + 1];
    t[2 * i] =
        __builtin_shufflevector(a, b, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
    t[2 * i + 1] =
        __builtin_shufflevector(a, b, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
  }
  // unpacklo_pd / unpackhi_pd: r[4g + c], 128-bit lane l, is column 4 l + c of rows 4g .. 4g + 3.
  for (int g = 0; g < 4; ++g) {
    const V a = t[4 * g], b = t[4 * g + 1], c = t[4 * g + 2], d = t[4 * g + 3];
    r[4 * g] =
        __builtin_shufflevector(a, c, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    r[4 * g + 1] =
        __builtin_shufflevector(a, c, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    r[4 * g + 2] =
        __builtin_shufflevector(b, d, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    r[4 * g + 3] =
        __builtin_shufflevector(b, d, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  }
  // 128-bit lanes: shuffle_f32x4 with 0x44, 0xEE, then 0x88, 0xDD.
  for (int c = 0; c < 4; ++c) {
    const V x0 = r[c], x1 = r[4 + c], x2 = r[8 + c], x3 = r[12 + c];
    const V y0 =
        __builtin_shufflevector(x0, x1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const V y1 = __builtin_shufflevector(x0, x1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28,
                                         29, 30, 31);
    const V y2 =
        __builtin_shufflevector(x2, x3, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const V y3 = __builtin_shufflevector(x2, x3, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28,
                                         29, 30, 31);
    simd::store(dst + c * ld, V(__builtin_shufflevector(y0, y2, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17,
                                                        18, 19, 24, 25, 26, 27)));
    simd::store(dst + (4 + c) * ld, V(__builtin_shufflevector(y0, y2, 4, 5, 6, 7, 12, 13, 14, 15,
                                                              20, 21, 22, 23, 28, 29, 30, 31)));
    simd::store(dst + (8 + c) * ld, V(__builtin_shufflevector(y1, y3, 0, 1, 2, 3, 8, 9, 10, 11, 16,
                                                              17, 18, 19, 24, 25, 26, 27)));
    simd::store(dst + (12 + c) * ld, V(__builtin_shufflevector(y1, y3, 4, 5, 6, 7, 12, 13, 14, 15,
                                                               20, 21, 22, 23, 28, 29, 30, 31)));
  }
}
#endif

// packed[p * width + j] = op(B)(p, j0 + j) for p < k, j < cols; zero for cols <= j < width.
template <typename T>
void pack(bool tb, int k, int j0, int cols, int width, const T* B, ptrdiff_t ldb, T* packed) {
  if (cols < width)
    for (int p = 0; p < k; ++p)
      for (int j = cols; j < width; ++j) packed[p * width + j] = T(0);
  if (!tb) {
    for (int p = 0; p < k; ++p)
      for (int j = 0; j < cols; ++j) packed[p * width + j] = B[p * ldb + j0 + j];
    return;
  }
  int j = 0;
#if defined(__AVX512F__)
  if constexpr (sizeof(T) == 4) {
    for (; j + 16 <= cols; j += 16) {
      int p = 0;
      for (; p + 16 <= k; p += 16)
        transpose16(B + (j0 + j) * ldb + p, ldb, packed + p * width + j, width);
      for (; p < k; ++p)
        for (int jj = j; jj < j + 16; ++jj) packed[p * width + jj] = B[(j0 + jj) * ldb + p];
    }
  }
#endif
  for (; j < cols; ++j) {  // row j0 + j of B is column j of the panel
    const T* row = B + (j0 + j) * ldb;
    for (int p = 0; p < k; ++p) packed[p * width + j] = row[p];
  }
}

// la::gemm on this ISA; `packed` holds k * 2 L elements.
template <typename T>
void gemm_run(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B,
              int ldb, T beta, T* C, int ldc, Structure s, T* packed) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == T(0)) {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        T& c = C[ptrdiff_t(i) * ldc + j];
        c = beta == T(0) ? T(0) : beta * c;
      }
    return;
  }
  constexpr int L = simd::kLanes<T>;
  const Call<T> call{m, k, A, ta ? 1 : lda, ta ? lda : 1, alpha, beta, C, ldc, s};
  for (int j0 = 0; j0 < n; j0 += 2 * L) {
    const int rest = n - j0, nv = rest > L ? 2 : 1, width = nv * L, cols = min_of(width, rest);
    const T* Bp = B + j0;
    ptrdiff_t ldp = ldb;
    if (tb || cols < width) {
      pack(tb, k, j0, cols, width, B, ldb, packed);
      Bp = packed;
      ldp = width;
    }
    if (nv == 2)
      panel<T, 2>(call, j0, Bp, ldp, cols);
    else
      panel<T, 1>(call, j0, Bp, ldp, cols);
  }
}

// bf16 element x as a float (exact).
inline float widen(std::uint16_t x) {
  const std::uint32_t u = std::uint32_t(x) << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

// The bf16 GEMM on a CPU without bf16 instructions: each pair widened to float in the order
// vdpbf16ps adds it (the odd element first, then the even one), then the float GEMM. The
// sums are then those of vdpbf16ps bit for bit, but for its flushing of results below
// 2^-126 (the inputs are flushed where they are rounded to bf16: bf16_operand).
inline void bgemm_widened(int m, int n, int k, const Bf16* A, int lda, const Bf16* B, int ldb,
                          float beta, float* C, int ldc, float* scratch) {
  float* Aw = scratch;
  float* Bw = Aw + ptrdiff_t(m) * k;
  float* packed = Bw + ptrdiff_t(k) * n;
  for (int r = 0; r < m; ++r)
    for (int p = 0; p < k; p += 2) {
      Aw[ptrdiff_t(r) * k + p] = widen(A[ptrdiff_t(r) * lda + p + 1].bits);
      Aw[ptrdiff_t(r) * k + p + 1] = widen(A[ptrdiff_t(r) * lda + p].bits);
    }
  for (int p = 0; p < k; p += 2)
    for (int j = 0; j < n; ++j) {
      Bw[ptrdiff_t(p) * n + j] = widen(B[ptrdiff_t(p / 2) * ldb + 2 * j + 1].bits);
      Bw[ptrdiff_t(p + 1) * n + j] = widen(B[ptrdiff_t(p / 2) * ldb + 2 * j].bits);
    }
  gemm_run<float>(false, false, m, n, k, 1.0f, Aw, k, Bw, n, beta, C, ldc, Structure::kDense,
                  packed);
}

// Independent accumulator chains: the FMA latency (4-5 cycles) times the FMA ports (2)
// needs about 10. 16 leaves headroom in AVX-512's 32 registers; AVX2's 16 take 12 plus
// the two operands. (The inner loop compiles to kChains register FMAs and a branch.)
constexpr int kChains = simd::kVecRegs >= 32 ? 16 : 12;

// `blocks` x kFmaInner x kChains vector FMAs; returns their sum so nothing is dead code.
template <typename T>
T fma_chains(long blocks, T seed) {
  Vec<T> acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = simd::broadcast(seed * T(c + 1));
  // a * acc + b with |a| < 1 keeps the values bounded (no overflow, no subnormals).
  const Vec<T> a = simd::broadcast(T(0.999) + seed * T(1e-9)), b = simd::broadcast(T(1e-3));
  for (long blk = 0; blk < blocks; ++blk) {
    for (int i = 0; i < kFmaInner; ++i) {
#pragma GCC unroll 16
      for (int c = 0; c < kChains; ++c) acc[c] = simd::fmadd(a, acc[c], b);
    }
    // The accumulators must be in memory here, so the compiler can neither collapse the
    // block loop into a closed form nor drop it (a store per chain per kFmaInner FMAs).
    __asm__ volatile("" : : "r"(acc) : "memory");
  }
  Vec<T> s = acc[0];
  for (int c = 1; c < kChains; ++c) s += acc[c];
  T out = 0;
  for (int l = 0; l < simd::kLanes<T>; ++l) out += s[l];
  return out;
}

}  // namespace

// The table of this ISA (gemm_kernels.h), bf16 GEMM given.
#define GDN_GEMM_KERNELS(bgemm)                                                             \
  {                                                                                         \
    simd::kLanes<float>, kTileRows, kChains, &gemm_run<float>, &gemm_run<double>, &(bgemm), \
        &fma_chains<float>, &fma_chains<double>                                             \
  }

}  // namespace gdn::la
