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

// Pre-activation at (b, t, c): sum_j w[c, j] x[b, t + j, c].
template <typename T>
__device__ inline double conv_pre(const T* x, const T* w, i64 b, i64 t, int c, i64 rows, int C,
                                  int W) {
  const T* xb = x + b * rows * C;
  double s = 0;
  for (int j = 0; j < W; ++j) s += double(w[c * W + j]) * double(xb[(t + j) * C + c]);
  return s;
}

template <typename T>
__global__ void conv_forward_kernel(const T* x, const T* w, int B, i64 T_len, int C, int W, T* y) {
  const i64 rows = T_len + W - 1;
  for (i64 k = thread_index(); k < B * T_len * C; k += thread_stride()) {
    const i64 bt = k / C;
    const int c = int(k % C);
    const double pre = conv_pre(x, w, bt / T_len, bt % T_len, c, rows, C, W);
    y[k] = T(pre * sigmoid_d(pre));
  }
}

// dpre = dy * silu'(pre), in double.
template <typename T>
__global__ void conv_dpre_kernel(const T* x, const T* w, const T* dy, int B, i64 T_len, int C,
                                 int W, double* dpre) {
  const i64 rows = T_len + W - 1;
  for (i64 k = thread_index(); k < B * T_len * C; k += thread_stride()) {
    const i64 bt = k / C;
    const int c = int(k % C);
    const double pre = conv_pre(x, w, bt / T_len, bt % T_len, c, rows, C, W);
    const double s = sigmoid_d(pre);
    dpre[k] = double(dy[k]) * s * (1.0 + pre * (1.0 - s));
  }
}

// Gather form: x row r of batch row b feeds outputs t = r - j.
template <typename T>
__global__ void conv_dx_kernel(const double* dpre, const T* w, int B, i64 T_len, int C, int W,
                               T* dx) {
  const i64 rows = T_len + W - 1;
  for (i64 k = thread_index(); k < B * rows * C; k += thread_stride()) {
    const i64 br = k / C;
    const int c = int(k % C);
    const i64 b = br / rows, r = br % rows;
    double s = 0;
    for (int j = 0; j < W; ++j) {
      const i64 t = r - j;
      if (t >= 0 && t < T_len) s += double(w[c * W + j]) * dpre[(b * T_len + t) * C + c];
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
  i64 T_len;
  int C, W;
  T* dw;
  __device__ double operator()(i64 bt, int col) const {
    const int j = col / C, c = col % C;
    const i64 b = bt / T_len, t = bt % T_len;
    return dpre[bt * C + c] * double(x[(b * (T_len + W - 1) + t + j) * C + c]);
  }
  __device__ void add(int col, double s) const {
    const int j = col / C, c = col % C;
    dw[c * W + j] += T(s);
  }
};

}  // namespace

template <typename T>
void causal_conv_silu_forward(Cuda, const T* x, const T* w, int B, i64 T_len, int C, int W, T* y) {
  if (i64(B) * T_len * C == 0) return;
  conv_forward_kernel<T><<<blocks_for(B * T_len * C), kThreads>>>(x, w, B, T_len, C, W, y);
  check_launch();
}

template <typename T>
void causal_conv_silu_backward(Cuda, const T* x, const T* w, const T* dy, int B, i64 T_len, int C,
                               int W, T* dx, T* dw) {
  if ((!dx && !dw) || i64(B) * C == 0) return;
  const i64 rows = T_len + W - 1;
  Scratch<double> dpre{std::size_t(B * T_len * C)};
  if (T_len > 0) {
    conv_dpre_kernel<T>
        <<<blocks_for(B * T_len * C), kThreads>>>(x, w, dy, B, T_len, C, W, dpre.get());
    check_launch();
  }
  if (dx && rows > 0) {
    conv_dx_kernel<T><<<blocks_for(B * rows * C), kThreads>>>(dpre.get(), w, B, T_len, C, W, dx);
    check_launch();
  }
  if (dw) column_sums(ConvDw<T>{dpre.get(), x, T_len, C, W, dw}, B * T_len, W * C);
}

template void causal_conv_silu_forward(Cuda, const float*, const float*, int, std::int64_t, int,
                                       int, float*);
template void causal_conv_silu_forward(Cuda, const double*, const double*, int, std::int64_t, int,
                                       int, double*);
template void causal_conv_silu_backward(Cuda, const float*, const float*, const float*, int,
                                        std::int64_t, int, int, float*, float*);
template void causal_conv_silu_backward(Cuda, const double*, const double*, const double*, int,
                                        std::int64_t, int, int, double*, double*);

}  // namespace gdn::ops
