// The causal depthwise conv + SiLU on the GPU: one output per thread; dx in gather form;
// dw by the deterministic column sums.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "ops/conv/conv.h"
#include "ops/cuda_util.cuh"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

// The first tap of output row bt: taps j < W - 1 - pos[bt] reach before its document.
__device__ inline int first_tap(const i64* pos, i64 bt, int W) {
  if (!pos) return 0;
  const i64 j0 = W - 1 - pos[bt];
  return int(j0 < 0 ? 0 : (j0 > W ? W : j0));
}

// Pre-activation at (b, t, c): sum_{j >= first tap} w[c, j] x[b, t + j, c].
template <typename T>
__device__ inline double conv_pre(const T* x, const T* w, const i64* pos, i64 b, i64 t, int c,
                                  i64 T_len, int C, int W) {
  const T* xb = x + b * (T_len + W - 1) * C;
  double s = 0;
  for (int j = first_tap(pos, b * T_len + t, W); j < W; ++j)
    s += double(w[c * W + j]) * double(xb[(t + j) * C + c]);
  return s;
}

template <typename T>
__global__ void conv_forward_kernel(const T* x, const T* w, const i64* pos, int B, i64 T_len, int C,
                                    int W, T* y) {
  for (i64 k = thread_index(); k < B * T_len * C; k += thread_stride()) {
    const i64 bt = k / C;
    const int c = int(k % C);
    const double pre = conv_pre(x, w, pos, bt / T_len, bt % T_len, c, T_len, C, W);
    y[k] = T(pre * sigmoid_d(pre));
  }
}

// dpre = dy * silu'(pre), in double.
template <typename T>
__global__ void conv_dpre_kernel(const T* x, const T* w, const i64* pos, const T* dy, int B,
                                 i64 T_len, int C, int W, double* dpre) {
  for (i64 k = thread_index(); k < B * T_len * C; k += thread_stride()) {
    const i64 bt = k / C;
    const int c = int(k % C);
    const double pre = conv_pre(x, w, pos, bt / T_len, bt % T_len, c, T_len, C, W);
    const double s = sigmoid_d(pre);
    dpre[k] = double(dy[k]) * s * (1.0 + pre * (1.0 - s));
  }
}

// Gather form: x row r of batch row b feeds outputs t = r - j.
template <typename T>
__global__ void conv_dx_kernel(const double* dpre, const T* w, const i64* pos, int B, i64 T_len,
                               int C, int W, T* dx) {
  const i64 rows = T_len + W - 1;
  for (i64 k = thread_index(); k < B * rows * C; k += thread_stride()) {
    const i64 br = k / C;
    const int c = int(k % C);
    const i64 b = br / rows, r = br % rows;
    double s = 0;
    for (int j = 0; j < W; ++j) {
      const i64 t = r - j;
      if (t >= 0 && t < T_len && j >= first_tap(pos, b * T_len + t, W))
        s += double(w[c * W + j]) * dpre[(b * T_len + t) * C + c];
    }
    dx[k] = T(s);
  }
}

// dw[c, j] += sum_{b, t} dpre[b, t, c] x[b, t + j, c]; column col = j C + c (adjacent
// threads read adjacent channels), row = b T + t.
template <typename T>
struct ConvDw {
  const double* dpre;
  const T* x;
  const i64* pos;
  i64 T_len;
  int C, W;
  T* dw;
  __device__ double operator()(i64 bt, int col) const {
    const int j = col / C, c = col % C;
    const i64 b = bt / T_len, t = bt % T_len;
    if (j < first_tap(pos, bt, W)) return 0.0;
    return dpre[bt * C + c] * double(x[(b * (T_len + W - 1) + t + j) * C + c]);
  }
  __device__ void add(int col, double s) const {
    const int j = col / C, c = col % C;
    dw[c * W + j] += T(s);
  }
};

}  // namespace

template <typename T>
void causal_conv_silu_forward(Cuda, const T* x, const T* w, int B, i64 T_len, int C, int W, T* y,
                              const i64* pos) {
  if (i64(B) * T_len * C == 0) return;
  conv_forward_kernel<T><<<blocks_for(B * T_len * C), kThreads>>>(x, w, pos, B, T_len, C, W, y);
  check_launch();
}

template <typename T>
void causal_conv_silu_backward(Cuda, const T* x, const T* w, const T* dy, int B, i64 T_len, int C,
                               int W, T* dx, T* dw, const i64* pos) {
  if ((!dx && !dw) || i64(B) * C == 0) return;
  const i64 rows = T_len + W - 1;
  Scratch<double> dpre{std::size_t(B * T_len * C)};
  if (T_len > 0) {
    conv_dpre_kernel<T>
        <<<blocks_for(B * T_len * C), kThreads>>>(x, w, pos, dy, B, T_len, C, W, dpre.get());
    check_launch();
  }
  if (dx && rows > 0) {
    conv_dx_kernel<T>
        <<<blocks_for(B * rows * C), kThreads>>>(dpre.get(), w, pos, B, T_len, C, W, dx);
    check_launch();
  }
  if (dw) column_sums(ConvDw<T>{dpre.get(), x, pos, T_len, C, W, dw}, B * T_len, W * C);
}

template void causal_conv_silu_forward(Cuda, const float*, const float*, int, std::int64_t, int,
                                       int, float*, const std::int64_t*);
template void causal_conv_silu_forward(Cuda, const double*, const double*, int, std::int64_t, int,
                                       int, double*, const std::int64_t*);
template void causal_conv_silu_backward(Cuda, const float*, const float*, const float*, int,
                                        std::int64_t, int, int, float*, float*,
                                        const std::int64_t*);
template void causal_conv_silu_backward(Cuda, const double*, const double*, const double*, int,
                                        std::int64_t, int, int, double*, double*,
                                        const std::int64_t*);

}  // namespace gdn::ops
