// Out-of-place transpose of a row-major block, dst[c * ldd + r] = src[r * lds + c], for the
// host GEMM's operands (the weight gradient's dy^T, ops/linear). Float blocks of 8 x 8 go
// through vector registers on AVX (8 loads, 24 shuffles, 8 stores); the edges, and other
// types, element by element. A naive loop writes one element per cache line touched and
// runs at a fifth of memory speed with power-of-two strides. Host-only.
#pragma once

#include <cstdint>

#include "ops/gemm/simd.h"

namespace gdn::la {

namespace transpose_detail {

#if defined(__AVX__) && !defined(__AVX512F__)
// The 8 x 8 float block at src (row stride lds) into dst (row stride ldd): the textbook
// unpack / 64-bit shuffle / 128-bit permute sequence, as vector shuffles.
inline void block8(const float* src, std::int64_t lds, float* dst, std::int64_t ldd) {
  using V = simd::Vec<float>;
  V r[8], t[8], s[8];
  for (int i = 0; i < 8; ++i) r[i] = simd::load(src + i * lds);
  for (int i = 0; i < 4; ++i) {  // unpacklo_ps / unpackhi_ps of rows 2i, 2i + 1
    t[2 * i] = __builtin_shufflevector(r[2 * i], r[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[2 * i + 1] = __builtin_shufflevector(r[2 * i], r[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  // s[4h + c]: columns c and c + 4 of rows 4h .. 4h + 3 (shuffle_ps 0x44 / 0xEE).
  for (int h = 0; h < 2; ++h) {
    const V a = t[4 * h], b = t[4 * h + 1], c = t[4 * h + 2], d = t[4 * h + 3];
    s[4 * h] = __builtin_shufflevector(a, c, 0, 1, 8, 9, 4, 5, 12, 13);
    s[4 * h + 1] = __builtin_shufflevector(a, c, 2, 3, 10, 11, 6, 7, 14, 15);
    s[4 * h + 2] = __builtin_shufflevector(b, d, 0, 1, 8, 9, 4, 5, 12, 13);
    s[4 * h + 3] = __builtin_shufflevector(b, d, 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int c = 0; c < 4; ++c) {  // permute2f128: low halves give column c, high c + 4
    simd::store(dst + c * ldd,
                V(__builtin_shufflevector(s[c], s[4 + c], 0, 1, 2, 3, 8, 9, 10, 11)));
    simd::store(dst + (c + 4) * ldd,
                V(__builtin_shufflevector(s[c], s[4 + c], 4, 5, 6, 7, 12, 13, 14, 15)));
  }
}
inline constexpr bool kVectorBlock = true;
#else
inline void block8(const float*, std::int64_t, float*, std::int64_t) {}
inline constexpr bool kVectorBlock = false;
#endif

}  // namespace transpose_detail

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols.
template <typename T>
void transpose(std::int64_t rows, std::int64_t cols, const T* src, std::int64_t lds, T* dst,
               std::int64_t ldd) {
  std::int64_t r0 = 0;
  if constexpr (sizeof(T) == 4 && transpose_detail::kVectorBlock) {
    for (; r0 + 8 <= rows; r0 += 8) {
      std::int64_t c0 = 0;
      for (; c0 + 8 <= cols; c0 += 8)
        transpose_detail::block8(src + r0 * lds + c0, lds, dst + c0 * ldd + r0, ldd);
      for (; c0 < cols; ++c0)
        for (std::int64_t r = r0; r < r0 + 8; ++r) dst[c0 * ldd + r] = src[r * lds + c0];
    }
  }
  // The last rows (all of them without the vector block), in tiles that stay in L1.
  constexpr std::int64_t kTile = 16;
  for (std::int64_t rt = r0; rt < rows; rt += kTile)
    for (std::int64_t ct = 0; ct < cols; ct += kTile)
      for (std::int64_t c = ct; c < ct + kTile && c < cols; ++c)
        for (std::int64_t r = rt; r < rt + kTile && r < rows; ++r)
          dst[c * ldd + r] = src[r * lds + c];
}

}  // namespace gdn::la
