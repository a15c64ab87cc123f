// Rotary position embedding on the GPU: one thread per rotated pair (or passed-through
// element), its angle, cos and sin in double as the host computes them.
#include <cstdint>

#include "core/error.h"
#include "ops/cuda_util.cuh"
#include "ops/rope/rope.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

// Element j of row (n, h): j < half rotates the pair (j, j + half) by sign * angle; R <= j
// copies x to y unless in place; half <= j < R is written by the thread of j - half. Each
// pair is read before it is written by the same thread, so y may equal x.
template <typename T>
__global__ void rope_kernel(const T* x, const i64* pos, i64 N, int H, int D, int R, double theta,
                            double sign, T* y) {
  const int half = R / 2;
  for (i64 e = thread_index(); e < N * H * D; e += thread_stride()) {
    const int j = int(e % D);
    const i64 n = e / D / H, row = e - j;
    if (j < half) {
      const double inv_freq = 1.0 / ::pow(theta, double(2 * j) / R);
      const double a = double(pos[n]) * inv_freq;
      const double c = ::cos(a), s = sign * ::sin(a);
      const double u = double(x[row + j]), w = double(x[row + j + half]);
      y[row + j] = T(u * c - w * s);
      y[row + j + half] = T(w * c + u * s);
    } else if (j >= R && y != x) {
      y[e] = x[e];
    }
  }
}

template <typename T>
void rotate(const T* x, const i64* pos, i64 N, int H, int D, int R, double theta, double sign,
            T* y) {
  GDN_CHECK(R >= 0 && R <= D && R % 2 == 0, "rope: rotary_dim = ", R,
            " must be even and in [0, head_dim = ", D, "]");
  const i64 n = N * H * D;
  if (n == 0) return;
  rope_kernel<T><<<blocks_for(n), kThreads>>>(x, pos, N, H, D, R, theta, sign, y);
  check_launch();
}

}  // namespace

template <typename T>
void rope_forward(Cuda, const T* x, const i64* pos, i64 N, int H, int D, int R, double theta,
                  T* y) {
  rotate(x, pos, N, H, D, R, theta, 1.0, y);
}

template <typename T>
void rope_backward(Cuda, const T* dy, const i64* pos, i64 N, int H, int D, int R, double theta,
                   T* dx) {
  rotate(dy, pos, N, H, D, R, theta, -1.0, dx);
}

template void rope_forward(Cuda, const float*, const std::int64_t*, std::int64_t, int, int, int,
                           double, float*);
template void rope_forward(Cuda, const double*, const std::int64_t*, std::int64_t, int, int, int,
                           double, double*);
template void rope_backward(Cuda, const float*, const std::int64_t*, std::int64_t, int, int, int,
                            double, float*);
template void rope_backward(Cuda, const double*, const std::int64_t*, std::int64_t, int, int, int,
                            double, double*);

}  // namespace gdn::ops
