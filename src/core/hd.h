// Host/device portability: the same source compiles as plain C++ (the CPU path) and as
// CUDA device code (the *_cuda.cu files of src/ops and src/gdn). GDN_HD marks functions callable
// from both; the math wrappers pick the device intrinsic or the std:: overload.
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define GDN_HD __host__ __device__
#else
#define GDN_HD
#endif

// Full unrolling in device code, where arrays of mma fragments must stay in registers (their
// indices constant); nothing on the host, where the pragma would be an unknown one.
// GDN_UNROLL_BY(n): unroll by n, where full unrolling would hoist too many loads or k is
// known only at run time.
#define GDN_PRAGMA(x) _Pragma(#x)
#ifdef __CUDA_ARCH__
#define GDN_UNROLL _Pragma("unroll")
#define GDN_UNROLL_BY(n) GDN_PRAGMA(unroll n)
#else
#define GDN_UNROLL
#define GDN_UNROLL_BY(n)
#endif

// A function kept out of line on the GPU (a rare path inside a hot loop stays a call).
#ifdef __CUDACC__
#define GDN_NOINLINE __noinline__
#else
#define GDN_NOINLINE
#endif

namespace gdn::hd {

// In device code std::exp has no device overload; ::exp / ::expf are CUDA's.
GDN_HD inline float exp(float x) {
#ifdef __CUDA_ARCH__
  return ::expf(x);
#else
  return std::exp(x);
#endif
}
GDN_HD inline double exp(double x) {
#ifdef __CUDA_ARCH__
  return ::exp(x);
#else
  return std::exp(x);
#endif
}
GDN_HD inline float sqrt(float x) {
#ifdef __CUDA_ARCH__
  return ::sqrtf(x);
#else
  return std::sqrt(x);
#endif
}
GDN_HD inline double sqrt(double x) {
#ifdef __CUDA_ARCH__
  return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}

// Base-2 forms for float (flash attention's softmax in log2 units).
GDN_HD inline float exp2(float x) {
#ifdef __CUDA_ARCH__
  return ::exp2f(x);
#else
  return std::exp2(x);
#endif
}
GDN_HD inline float log2(float x) {
#ifdef __CUDA_ARCH__
  return ::log2f(x);
#else
  return std::log2(x);
#endif
}

// a b and a + b each rounded on their own, on both sides: nvcc, and GCC at -O3 with FMA
// (it contracts across inlined calls, whatever -std says), fuse a b + c into one FMA where
// they see fit, so two kernels with the same sums could differ in the last bit. On the
// GPU the _rn intrinsics are never fused; on the host an empty asm statement makes the
// rounded value opaque. For epilogues and short sums, not for hot loops.
template <typename T>
GDN_HD inline T rounded(T x) {
#if !defined(__CUDA_ARCH__) && defined(__GNUC__) && defined(__x86_64__)
  __asm__("" : "+x"(x));
#elif !defined(__CUDA_ARCH__)
  volatile T v = x;
  x = v;
#endif
  return x;
}
template <typename T>
GDN_HD inline T mul_rn(T a, T b) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == 4)
    return __fmul_rn(a, b);
  else
    return __dmul_rn(a, b);
#else
  return rounded(a * b);
#endif
}
template <typename T>
GDN_HD inline T add_rn(T a, T b) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == 4)
    return __fadd_rn(a, b);
  else
    return __dadd_rn(a, b);
#else
  return rounded(a + b);
#endif
}

// a b + c rounded once, on every device and in every inlining context (a compiler that may
// contract a b + c decides per context, and two kernels that must agree bit for bit then
// need not).
template <typename T>
GDN_HD inline T fma(T a, T b, T c) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == 4)
    return fmaf(a, b, c);
  else
    return ::fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// x == -inf (a NaN is not).
template <typename T>
GDN_HD inline bool is_minus_inf(T x) {
#ifdef __CUDA_ARCH__
  return isinf(x) && x < T(0);
#else
  return std::isinf(x) && x < T(0);
#endif
}

}  // namespace gdn::hd
