// The causal depthwise conv + SiLU on the host. dw is split by channels, each unit summing
// every (b, t) in order, so results are bit-identical for any OMP_NUM_THREADS.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/conv/conv.h"
#include "ops/host_util.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

namespace {

constexpr int kChanChunk = 64;  // channels per work unit of the conv weight gradient

// w [C, W] as wt [W, C] in double: the loops below run along the channels (contiguous in
// x, dy and wt, so they vectorise) and over the taps j outside, each channel's sum still
// in the order j = 0, 1, ..., W - 1.
template <typename T>
std::vector<double> taps_by_channel(const T* w, int C, int W) {
  std::vector<double> wt(static_cast<std::size_t>(W) * C);
  for (int c = 0; c < C; ++c)
    for (int j = 0; j < W; ++j) wt[std::size_t(j) * C + c] = double(w[c * W + j]);
  return wt;
}

// The first tap of output row bt: taps j < W - 1 - pos[bt] reach before its document.
inline int first_tap(const i64* pos, i64 bt, int W) {
  return pos ? int(std::clamp<i64>(W - 1 - pos[bt], 0, W)) : 0;
}

// Pre-activation of the conv at (b, t): sum_{j >= j0} w[c, j] x[b, t + j, c] for all c.
template <typename T>
inline void conv_pre(const T* xb, const double* wt, i64 t, int C, int W, int j0, double* pre) {
  std::fill(pre, pre + C, 0.0);
  for (int j = j0; j < W; ++j) {
    const T* xr = xb + (t + j) * C;
    const double* wj = wt + std::size_t(j) * C;
    for (int c = 0; c < C; ++c) pre[c] += wj[c] * double(xr[c]);
  }
}

// s[c] = sigmoid(pre[c]) in T's precision: la::sigmoid on pre rounded to T (a vector exp
// for float; for double the values and libm's exp, as before).
template <typename T>
void row_sigmoid(const double* pre, int C, T* s) {
  for (int c = 0; c < C; ++c) s[c] = T(pre[c]);
  la::sigmoid(s, C, s);
}

// The forward of every output row bt = b * T_len + t, in parallel: the pre-activation pre
// and its sigmoid sg (in T's precision) of the row, C each, handed to row(bt, pre, sg).
template <typename T, typename Row>
void for_each_row(const T* x, const std::vector<double>& wt, int B, i64 T_len, int C, int W,
                  const i64* pos, Row row) {
  const i64 rows = T_len + W - 1;  // rows of x per batch row, halo included
#pragma omp parallel
  {
    std::vector<double> pre(static_cast<std::size_t>(C));
    std::vector<T> sg(static_cast<std::size_t>(C));
#pragma omp for schedule(static)
    for (i64 bt = 0; bt < B * T_len; ++bt) {
      const i64 b = bt / T_len, t = bt % T_len;
      conv_pre(x + b * rows * C, wt.data(), t, C, W, first_tap(pos, bt, W), pre.data());
      row_sigmoid(pre.data(), C, sg.data());
      row(bt, pre.data(), sg.data());
    }
  }
}

}  // namespace

template <typename T>
void causal_conv_silu_forward(Host, const T* x, const T* w, int B, i64 T_len, int C, int W, T* y,
                              const i64* pos) {
  for_each_row(x, taps_by_channel(w, C, W), B, T_len, C, W, pos,
               [&](i64 bt, const double* pre, const T* sg) {
                 for (int c = 0; c < C; ++c) y[bt * C + c] = T(pre[c] * double(sg[c]));
               });
}

template <typename T>
void causal_conv_silu_backward(Host, const T* x, const T* w, const T* dy, int B, i64 T_len, int C,
                               int W, T* dx, T* dw, const i64* pos) {
  const i64 rows = T_len + W - 1;
  const std::vector<double> wt = taps_by_channel(w, C, W);
  // dpre = dy * silu'(pre), silu'(p) = sig(p) (1 + p (1 - sig(p))), kept in double.
  std::vector<double> dpre(static_cast<std::size_t>(B * T_len * C));
  for_each_row(x, wt, B, T_len, C, W, pos, [&](i64 bt, const double* pre, const T* sg) {
    for (int c = 0; c < C; ++c) {
      const double s = sg[c];
      dpre[bt * C + c] = double(dy[bt * C + c]) * s * (1.0 + pre[c] * (1.0 - s));
    }
  });
  if (dx) {
    // Gather form, one x row per iteration (no races): x row r feeds outputs t = r - j.
#pragma omp parallel
    {
      std::vector<double> s(static_cast<std::size_t>(C));
#pragma omp for schedule(static)
      for (i64 br = 0; br < B * rows; ++br) {
        const i64 b = br / rows, r = br % rows;
        std::fill(s.begin(), s.end(), 0.0);
        for (int j = 0; j < W; ++j) {
          const i64 t = r - j;
          if (t < 0 || t >= T_len || j < first_tap(pos, b * T_len + t, W)) continue;
          const double *dp = &dpre[(b * T_len + t) * C], *wj = wt.data() + std::size_t(j) * C;
          for (int c = 0; c < C; ++c) s[std::size_t(c)] += wj[c] * dp[c];
        }
        for (int c = 0; c < C; ++c) dx[br * C + c] = T(s[std::size_t(c)]);
      }
    }
  }
  if (dw) {
    // dw[c, j] += sum_{b, t} dpre[b, t, c] x[b, t + j, c]: split by channels, each unit
    // sums all (b, t) in order.
    const int chunks = (C + kChanChunk - 1) / kChanChunk;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < chunks; ++ch) {
      const int c0 = ch * kChanChunk, c1 = std::min(C, c0 + kChanChunk);
      const int n = c1 - c0;
      std::vector<double> acc(static_cast<std::size_t>(W) * n, 0.0);  // [j, c - c0]
      for (i64 b = 0; b < B; ++b)
        for (i64 t = 0; t < T_len; ++t) {
          const double* dp = &dpre[(b * T_len + t) * C + c0];
          for (int j = first_tap(pos, b * T_len + t, W); j < W; ++j) {
            const T* xr = x + (b * rows + t + j) * C + c0;
            double* aj = acc.data() + std::size_t(j) * n;
            for (int c = 0; c < n; ++c) aj[c] += dp[c] * double(xr[c]);
          }
        }
      for (int c = c0; c < c1; ++c)
        for (int j = 0; j < W; ++j) dw[c * W + j] += T(acc[std::size_t(j) * n + (c - c0)]);
    }
  }
}

template void causal_conv_silu_forward(Host, const float*, const float*, int, std::int64_t, int,
                                       int, float*, const std::int64_t*);
template void causal_conv_silu_forward(Host, const double*, const double*, int, std::int64_t, int,
                                       int, double*, const std::int64_t*);
template void causal_conv_silu_backward(Host, const float*, const float*, const float*, int,
                                        std::int64_t, int, int, float*, float*,
                                        const std::int64_t*);
template void causal_conv_silu_backward(Host, const double*, const double*, const double*, int,
                                        std::int64_t, int, int, double*, double*,
                                        const std::int64_t*);

}  // namespace gdn::ops
