// The GEMM kernels for AVX-512F with AVX512_BF16 (Zen 4, Cooper Lake, Sapphire Rapids): the
// float kernels of gemm_avx512.cpp, and a bf16 kernel on vdpbf16ps, which multiplies a pair
// of bf16 values by another pair and adds both products to a float lane (two roundings,
// the odd element's product first): twice the multiply-adds of a float FMA per instruction,
// and half the bytes per operand.
//
// Its register tile is the float kernel's: R rows x two vectors of 16 columns of C in
// registers over the reduction; per step of a pair of k, two 64-byte loads of B's pairs
// and one broadcast dword of A (a pair) per row.
#include <immintrin.h>

#include "ops/gemm/register_gemm.h"

namespace gdn::la {

namespace {

inline std::uint32_t pair_at(const Bf16* p) {
  std::uint32_t u;
  __builtin_memcpy(&u, p, sizeof u);
  return u;
}

// C[R x cols] = beta C + A B over k2 pairs, B's panel of NV vectors (row stride ldb bf16).
template <int R, int NV>
void dp_tile(int k2, const Bf16* A, ptrdiff_t lda, const Bf16* B, ptrdiff_t ldb, int cols,
             float beta, float* C, ptrdiff_t ldc) {
  __m512 acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int h = 0; h < NV; ++h) acc[r][h] = _mm512_setzero_ps();
  for (int p = 0; p < k2; ++p) {
    __m512bh b[NV];
#pragma GCC unroll 2
    for (int h = 0; h < NV; ++h)
      b[h] = (__m512bh)_mm512_loadu_si512(static_cast<const void*>(B + p * ldb + 32 * h));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(pair_at(A + r * lda + 2 * p)));
#pragma GCC unroll 2
      for (int h = 0; h < NV; ++h) acc[r][h] = _mm512_dpbf16_ps(acc[r][h], a, b[h]);
    }
  }
  // The float kernel's epilogue with alpha = 1 (bgemm_widened's bits).
  const __m512 vb = _mm512_set1_ps(beta);
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
    if (cols == NV * 16) {
#pragma GCC unroll 2
      for (int h = 0; h < NV; ++h) {
        const __m512 x = acc[r][h];
        _mm512_storeu_ps(c + 16 * h,
                         beta == 0.0f ? x
                         : beta == 1.0f
                             ? _mm512_add_ps(_mm512_loadu_ps(c + 16 * h), x)
                             : _mm512_add_ps(_mm512_mul_ps(vb, _mm512_loadu_ps(c + 16 * h)), x));
      }
    } else {
      float tmp[NV * 16];
      for (int h = 0; h < NV; ++h) _mm512_storeu_ps(tmp + 16 * h, acc[r][h]);
      for (int j = 0; j < cols; ++j)
        c[j] = beta == 0.0f ? tmp[j] : beta == 1.0f ? c[j] + tmp[j] : beta * c[j] + tmp[j];
    }
  }
}

template <int NV>
void dp_panel(int m, int k2, const Bf16* A, ptrdiff_t lda, const Bf16* B, ptrdiff_t ldb, int cols,
              float beta, float* C, ptrdiff_t ldc) {
  for_row_tiles(m, [&]<int R>(int i) {
    dp_tile<R, NV>(k2, A + i * lda, lda, B, ldb, cols, beta, C + i * ldc, ldc);
  });
}

// Panels of 32 columns (16 at the end where fewer are left); a narrower last panel is
// copied with zero pairs to full width first, so every load is a whole vector.
void bgemm_dp(int m, int n, int k, const Bf16* A, int lda, const Bf16* B, int ldb, float beta,
              float* C, int ldc, float* scratch) {
  if (m <= 0 || n <= 0) return;
  const int k2 = k / 2;
  Bf16* packed = reinterpret_cast<Bf16*>(scratch);
  for (int j0 = 0; j0 < n; j0 += 32) {
    const int rest = n - j0, nv = rest > 16 ? 2 : 1, width = 16 * nv, cols = min_of(width, rest);
    const Bf16* Bp = B + 2 * j0;
    ptrdiff_t ldp = ldb;
    if (cols < width) {
      for (int p = 0; p < k2; ++p)
        for (int j = 0; j < 2 * width; ++j)
          packed[p * 2 * width + j] = j < 2 * cols ? B[ptrdiff_t(p) * ldb + 2 * j0 + j] : Bf16{};
      Bp = packed;
      ldp = 2 * width;
    }
    if (nv == 2)
      dp_panel<2>(m, k2, A, lda, Bp, ldp, cols, beta, C + j0, ldc);
    else
      dp_panel<1>(m, k2, A, lda, Bp, ldp, cols, beta, C + j0, ldc);
  }
}

}  // namespace

extern const GemmKernels kGemmAvx512Bf16 = GDN_GEMM_KERNELS(bgemm_dp);

}  // namespace gdn::la
