// Rotary position embedding on the host: a row (token) per loop iteration, its cos and sin
// computed once and shared by the H heads.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/rope/rope.h"

namespace gdn::ops {

using i64 = std::int64_t;

namespace {

// Rotates every head of every row by +angle (sign = 1, the forward) or -angle (sign = -1,
// the backward: a rotation's transpose is its inverse). Each pair is read before it is
// written, so y may equal x.
template <typename T>
void rotate(const T* x, const i64* pos, i64 N, int H, int D, int R, double theta, double sign,
            T* y) {
  GDN_CHECK(R >= 0 && R <= D && R % 2 == 0, "rope: rotary_dim = ", R,
            " must be even and in [0, head_dim = ", D, "]");
  const int half = R / 2;
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) inv_freq[i] = 1.0 / std::pow(theta, double(2 * i) / R);
#pragma omp parallel
  {
    std::vector<double> c(static_cast<std::size_t>(half)), s(c.size());
#pragma omp for schedule(static)
    for (i64 n = 0; n < N; ++n) {
      for (int i = 0; i < half; ++i) {
        const double a = double(pos[n]) * inv_freq[i];
        c[i] = std::cos(a);
        s[i] = sign * std::sin(a);
      }
      for (int h = 0; h < H; ++h) {
        const T* xr = x + (n * H + h) * D;
        T* yr = y + (n * H + h) * D;
        for (int i = 0; i < half; ++i) {
          const double a = double(xr[i]), b = double(xr[i + half]);
          yr[i] = T(a * c[i] - b * s[i]);
          yr[i + half] = T(b * c[i] + a * s[i]);
        }
        if (yr != xr)
          for (int j = R; j < D; ++j) yr[j] = xr[j];
      }
    }
  }
}

}  // namespace

template <typename T>
void rope_forward(Host, const T* x, const i64* pos, i64 N, int H, int D, int R, double theta,
                  T* y) {
  rotate(x, pos, N, H, D, R, theta, 1.0, y);
}

template <typename T>
void rope_backward(Host, const T* dy, const i64* pos, i64 N, int H, int D, int R, double theta,
                   T* dx) {
  rotate(dy, pos, N, H, D, R, theta, -1.0, dx);
}

template void rope_forward(Host, const float*, const std::int64_t*, std::int64_t, int, int, int,
                           double, float*);
template void rope_forward(Host, const double*, const std::int64_t*, std::int64_t, int, int, int,
                           double, double*);
template void rope_backward(Host, const float*, const std::int64_t*, std::int64_t, int, int, int,
                            double, float*);
template void rope_backward(Host, const double*, const std::int64_t*, std::int64_t, int, int, int,
                            double, double*);

}  // namespace gdn::ops
