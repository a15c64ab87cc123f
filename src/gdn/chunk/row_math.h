// Scalar helpers of the chunk kernel (chunk_kernel.h) written so that the host compiler
// vectorises the loops that call them, with results that depend on the inputs only (never
// on alignment or thread count). On the GPU each is one thread's plain loop or call.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/hd.h"

namespace gdn {

// sum_i a[i] b[i], i < n. On the host in 16 interleaved partial sums that are then added
// pairwise: the compiler turns that into vector FMAs, where one running sum would wait on
// the add latency at every element. On the GPU in order. Either way the order depends on
// n only. a and b are pointers or anything with a[i] (a row read in another form); the sum
// is in b's element type.
template <typename A, typename B>
GDN_HD auto row_dot(const A& a, const B& b, int n) {
  using T = std::remove_cvref_t<decltype(b[0])>;
#ifdef __CUDA_ARCH__
  T acc = 0;
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
#else
  constexpr int W = 16;
  T part[W] = {};
  int i = 0;
  for (; i + W <= n; i += W)
    for (int l = 0; l < W; ++l) part[l] += a[i + l] * b[i + l];
  for (int l = 0; i + l < n; ++l) part[l] += a[i + l] * b[i + l];
  for (int w = W / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) part[l] += part[l + w];
  return part[0];
#endif
}

// a b + c rounded once, said outright. GCC at -O3 with FMA and nvcc fuse a b + c where
// they see fit, and where two products meet one sum (x + a b + c d) either may be the one
// fused, which C++ leaves open. The backward's elementwise sums, which ChunkKernel::backward
// and the GPU's register backward (gdn/backward/backward_bf16.h) must round alike in two
// different kernels, say it with this instead. One FMA instruction on the GPU and on an
// FMA host (the build's -march=native), in vectorised loops too.
template <typename T>
GDN_HD T fused(T a, T b, T c) {
  return hd::fma(a, b, c);
}

// exp(x) in float as straight-line arithmetic (Cephes' expf: x = n ln2 + r, a degree-6
// polynomial in r, times 2^n), so that a loop of them vectorises; libm's expf is a call
// the compiler cannot vectorise without -ffast-math. Within 2 ulp of expf for every finite
// x (checked in test_chunk_kernel), exactly 1 at 0, 0 below the smallest subnormal's log,
// +inf above the largest float's log, NaN for NaN. Host only (decay_exp picks it).
inline float exp_poly(float x) {
  // Branch-free (selects only, no float-to-int conversion) so that GCC vectorises a loop
  // of it: the clamp keeps n in [-150, 128], 2^n is two normal powers of two (n / 2 and
  // n - n / 2: subnormal results and n = 128 come out right), and n is rounded with the
  // 1.5 * 2^23 trick.
  const float xc = x < -104.0f ? -104.0f : (x > 88.8f ? 88.8f : x);
  const float big = xc * 1.44269504088896341f + 12582912.0f;
  std::uint32_t bits;
  std::memcpy(&bits, &big, 4);
  const int n = int(bits - 0x4B400000u);
  const float fn = big - 12582912.0f;
  const float r = (xc - fn * 0.693359375f) - fn * -2.12194440e-4f;  // ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int n1 = n >> 1, n2 = n - n1;
  const std::uint32_t b1 = std::uint32_t(n1 + 127) << 23, b2 = std::uint32_t(n2 + 127) << 23;
  const std::uint32_t inf_bits = 0x7f800000u;
  float s1, s2, inf;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  std::memcpy(&inf, &inf_bits, 4);
  float y = p * s1 * s2;
  y = x > 88.72283935546875f ? inf : y;
  y = x < -103.972f ? 0.0f : y;
  return x != x ? x : y;
}

// The exp of the decay matrix D_ij = exp(G_i - G_j): exp_poly for float on the host (C^2
// per chunk: a scalar libm call each was a sixth of the forward), the library exp
// otherwise (double keeps its exactness against the recurrence; the GPU has fast exp).
template <typename T>
GDN_HD T decay_exp(T x) {
#ifdef __CUDA_ARCH__
  return hd::exp(x);
#else
  if constexpr (sizeof(T) == 4)
    return exp_poly(x);
  else
    return hd::exp(x);
#endif
}

}  // namespace gdn
