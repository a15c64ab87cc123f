// e^x over a row of values, for the softmax tiles of the host attention (and any other
// host op that exponentiates rows), and the logistic sigmoid built on it. Float runs a vector
// polynomial (Cephes' expf: 2^n times a degree-7 polynomial of the remainder, about 2 ulp); double
// calls std::exp per element, so the exact fp64 path keeps libm's rounding.
//
// Every element goes through the same vector code whatever its index (the tail is padded
// into a full vector), so a value's result never depends on the row's length or on where
// it sits in it. Inputs below -87 give exactly 0 (softmax's masked -inf included); NaN
// stays NaN.
// Host-only: never include it from CUDA sources.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/gemm/simd.h"

namespace gdn::la {

namespace detail {

using IntVec = std::int32_t __attribute__((vector_size(simd::kVecBytes)));

inline simd::Vec<float> exp_vec(simd::Vec<float> x) {
  using V = simd::Vec<float>;
  const V hi = simd::broadcast(88.0f), lo = simd::broadcast(-87.0f);
  const auto under = x < lo;  // lanes that flush to zero (-inf included)
  x = x > hi ? hi : x;        // comparisons keep NaN (both are false for it)
  x = x < lo ? lo : x;
  // n = round(x log2 e) by the 1.5 2^23 trick (|n| <= 127 here), r = x - n ln 2 in two parts.
  const V magic = simd::broadcast(12582912.0f);
  const V n = simd::fmadd(x, simd::broadcast(1.44269504088896341f), magic) - magic;
  V r = simd::fmadd(n, simd::broadcast(-0.693359375f), x);
  r = simd::fmadd(n, simd::broadcast(2.12194440e-4f), r);
  V p = simd::broadcast(1.9875691500e-4f);
  p = simd::fmadd(p, r, simd::broadcast(1.3981999507e-3f));
  p = simd::fmadd(p, r, simd::broadcast(8.3334519073e-3f));
  p = simd::fmadd(p, r, simd::broadcast(4.1665795894e-2f));
  p = simd::fmadd(p, r, simd::broadcast(1.6666665459e-1f));
  p = simd::fmadd(p, r, simd::broadcast(5.0000001201e-1f));
  p = simd::fmadd(p, r * r, r + simd::broadcast(1.0f));
  const IntVec bits = (__builtin_convertvector(n, IntVec) + 127) << 23;  // 2^n
  V scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const V y = p * scale;
  return under ? V{} : y;
}

}  // namespace detail

// x[i] = e^x[i] for i < n.
inline void exp_in_place(float* x, int n) {
  constexpr int L = simd::kLanes<float>;
  int i = 0;
  for (; i + L <= n; i += L) simd::store(x + i, detail::exp_vec(simd::load(x + i)));
  if (i < n) {
    float tail[L] = {};
    std::copy(x + i, x + n, tail);
    simd::store(tail, detail::exp_vec(simd::load(tail)));
    std::copy(tail, tail + (n - i), x + i);
  }
}
inline void exp_in_place(double* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

// s[i] = 1 / (1 + e^-x[i]) for i < n (s may be x): the logistic sigmoid of the gates
// (SwiGLU, SiLU, the attention gate). Float through the vector exp (within a few ulp,
// position-independent like exp_in_place); double through libm, as the exact path.
inline void sigmoid(const float* x, int n, float* s) {
  using V = simd::Vec<float>;
  constexpr int L = simd::kLanes<float>;
  const V one = simd::broadcast(1.0f);
  int i = 0;
  for (; i + L <= n; i += L) simd::store(s + i, one / (one + detail::exp_vec(-simd::load(x + i))));
  if (i < n) {
    float tail[L] = {};
    std::copy(x + i, x + n, tail);
    simd::store(tail, one / (one + detail::exp_vec(-simd::load(tail))));
    std::copy(tail, tail + (n - i), s + i);
  }
}
inline void sigmoid(const double* x, int n, double* s) {
  for (int i = 0; i < n; ++i) s[i] = 1.0 / (1.0 + std::exp(-x[i]));
}

}  // namespace gdn::la
