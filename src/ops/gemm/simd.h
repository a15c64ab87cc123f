// The SIMD vector of T that this translation unit is compiled for, as a GCC/Clang vector
// type, and the few operations the GEMM micro-kernel and the FMA peak benchmark
// need. Explicit vectors keep a register tile of accumulators in registers, which the
// auto-vectoriser does not manage for a GEMM loop nest; explicit FMA makes every
// multiply-add one rounding whatever -ffp-contract says (the results then depend on the
// shapes only, never on the compiler's choice to fuse).
// Host-only: never include it from CUDA sources.
//
// The GEMM kernels are compiled once per ISA (gemm_kernels.h) and linked into one binary, so
// everything here lives in an inline namespace named after the ISA of the including file:
// an AVX-512 `load` and an AVX2 one are then different functions, and the linker cannot
// hand the AVX-512 body to code that runs on an AVX2 CPU.
#pragma once

#include <cstring>

#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define GDN_SIMD_ISA avx512
#elif defined(__AVX2__) && defined(__FMA__)
#define GDN_SIMD_ISA avx2
#elif defined(__AVX__)
#define GDN_SIMD_ISA avx
#else
#define GDN_SIMD_ISA base
#endif

namespace gdn::simd {
inline namespace GDN_SIMD_ISA {

#if defined(__AVX512F__)
inline constexpr int kVecBytes = 64;
#elif defined(__AVX__)
inline constexpr int kVecBytes = 32;
#else
inline constexpr int kVecBytes = 16;
#endif
// Vector registers the compiler may allocate: 32 with AVX-512, 16 otherwise (x86-64 SSE and
// AVX2; also enough for ARM NEON's 32). It sizes the GEMM's register tile.
#if defined(__AVX512F__)
inline constexpr int kVecRegs = 32;
#else
inline constexpr int kVecRegs = 16;
#endif
// Whether fmadd below is one fused instruction (otherwise a multiply and an add).
#if defined(__AVX512F__) || (defined(__FMA__) && defined(__AVX__))
inline constexpr bool kHardwareFma = true;
#else
inline constexpr bool kHardwareFma = false;
#endif

template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(kVecBytes)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(kVecBytes)));
};
template <typename T>
using Vec = typename VecOf<T>::type;
template <typename T>
inline constexpr int kLanes = int(kVecBytes / sizeof(T));

template <typename T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <typename T>
inline void store(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof(v));
}
// x in every lane, one instruction (vbroadcastss). `Vec<T>{} + x` would add 0.0 first:
// the compiler must keep that add (it turns -0.0 into +0.0), a dependent add on every
// broadcast of the GEMM's inner loop.
#if defined(__AVX512F__)
inline Vec<float> broadcast(float x) {
  return _mm512_set1_ps(x);
}
inline Vec<double> broadcast(double x) {
  return _mm512_set1_pd(x);
}
#elif defined(__AVX__)
inline Vec<float> broadcast(float x) {
  return _mm256_set1_ps(x);
}
inline Vec<double> broadcast(double x) {
  return _mm256_set1_pd(x);
}
#else
template <typename T>
inline Vec<T> broadcast(T x) {
  Vec<T> v;
  for (int i = 0; i < kLanes<T>; ++i) v[i] = x;
  return v;
}
#endif

// a * b + c, fused (one rounding) where the target has FMA. Overloads, not a template:
// T cannot be deduced from Vec<T>.
#if defined(__AVX512F__)
inline Vec<float> fmadd(Vec<float> a, Vec<float> b, Vec<float> c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline Vec<double> fmadd(Vec<double> a, Vec<double> b, Vec<double> c) {
  return _mm512_fmadd_pd(a, b, c);
}
#elif defined(__FMA__) && defined(__AVX__)
inline Vec<float> fmadd(Vec<float> a, Vec<float> b, Vec<float> c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline Vec<double> fmadd(Vec<double> a, Vec<double> b, Vec<double> c) {
  return _mm256_fmadd_pd(a, b, c);
}
#else
template <typename V>
inline V fmadd(V a, V b, V c) {
  return a * b + c;
}
#endif

}  // namespace GDN_SIMD_ISA
}  // namespace gdn::simd
