// bfloat16, the storage type of the GDN op's bf16 mode (gdn/bf16_op.h): the upper 16
// bits of an IEEE float (8 exponent bits, 7 stored mantissa bits). Only storage: every
// product, state and accumulator stays in float. Conversion from float rounds to nearest,
// ties to even (what torch's .to(torch.bfloat16) and CUDA's __float2bfloat16_rn do); a NaN
// stays a (quiet) NaN. One source for the host and for CUDA device code.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace gdn {

struct Bf16 {
  std::uint16_t bits = 0;
};
static_assert(sizeof(Bf16) == 2, "Bf16 must be two bytes: tensors of it are stored densely");

namespace bf16_detail {
GDN_HD inline std::uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
GDN_HD inline float bits_float(std::uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}
}  // namespace bf16_detail

// Exact: every bf16 value is a float.
GDN_HD inline float to_float(Bf16 x) {
  return bf16_detail::bits_float(std::uint32_t(x.bits) << 16);
}

namespace bf16_detail {
// The float bits of the bf16 value nearest the float with bits u, low 16 bits zero. Adding
// 0x7fff plus the lowest kept bit rounds the dropped 16 bits to nearest, ties to the even
// result; a carry into the exponent is the correct rounding up (to inf at the top of the
// range). A NaN keeps its sign and gets the quiet bit. A select, not a branch, so that
// loops over arrays vectorise.
GDN_HD inline std::uint32_t rounded_bits(std::uint32_t u) {
  const std::uint32_t nearest = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const std::uint32_t quiet_nan = (u | 0x00400000u) & 0xffff0000u;
  return (u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : nearest;
}
}  // namespace bf16_detail

GDN_HD inline Bf16 to_bf16(float x) {
  return Bf16{std::uint16_t(bf16_detail::rounded_bits(bf16_detail::float_bits(x)) >> 16)};
}

// The bf16 value nearest x (ties to even), as a float: to_float(to_bf16(x)).
GDN_HD inline float round_bf16(float x) {
  return bf16_detail::bits_float(bf16_detail::rounded_bits(bf16_detail::float_bits(x)));
}
GDN_HD inline double round_bf16(double x) {
  return round_bf16(float(x));
}

}  // namespace gdn
