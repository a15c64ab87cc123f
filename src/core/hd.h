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
#ifdef __CUDA_ARCH__
#define GDN_UNROLL _Pragma("unroll")
#else
#define GDN_UNROLL
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
