// The GDN layer's small per-token ops: the causal depthwise conv + SiLU and the gating.
// Reductions over rows (dw, dA_log, ddt_bias) run in an order fixed by the shapes alone,
// so results are bit-identical for any OMP_NUM_THREADS.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/ops.h"

namespace gdn::ops {

namespace {

using i64 = std::int64_t;

constexpr int kChanChunk = 64;   // channels per work unit of the conv weight gradient
constexpr i64 kRowBlock = 1024;  // rows per partial sum of the gating parameter gradients

inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
// log(1 + e^x) without overflow; above 20 it equals x to double precision's taste.
inline double softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));
}

// Pre-activation of the conv at (b, t): sum_j w[c, j] x[b, t + j, c] for all c.
template <typename T>
inline void conv_pre(const T* xb, const T* w, i64 t, int C, int W, double* pre) {
  for (int c = 0; c < C; ++c) {
    double s = 0;
    for (int j = 0; j < W; ++j) s += double(w[c * W + j]) * double(xb[(t + j) * C + c]);
    pre[c] = s;
  }
}

}  // namespace

template <typename T>
void causal_conv_silu_forward(const T* x, const T* w, int B, i64 T_len, int C, int W, T* y) {
  const i64 rows = T_len + W - 1;  // rows of x per batch row, halo included
#pragma omp parallel
  {
    std::vector<double> pre(static_cast<std::size_t>(C));
#pragma omp for schedule(static)
    for (i64 bt = 0; bt < B * T_len; ++bt) {
      const i64 b = bt / T_len, t = bt % T_len;
      conv_pre(x + b * rows * C, w, t, C, W, pre.data());
      for (int c = 0; c < C; ++c) y[bt * C + c] = T(pre[c] * sigmoid(pre[c]));
    }
  }
}

template <typename T>
void causal_conv_silu_backward(const T* x, const T* w, const T* dy, int B, i64 T_len, int C, int W,
                               T* dx, T* dw) {
  const i64 rows = T_len + W - 1;
  // dpre = dy * silu'(pre), silu'(p) = sig(p) (1 + p (1 - sig(p))), kept in double.
  std::vector<double> dpre(static_cast<std::size_t>(B * T_len * C));
#pragma omp parallel
  {
    std::vector<double> pre(static_cast<std::size_t>(C));
#pragma omp for schedule(static)
    for (i64 bt = 0; bt < B * T_len; ++bt) {
      const i64 b = bt / T_len, t = bt % T_len;
      conv_pre(x + b * rows * C, w, t, C, W, pre.data());
      for (int c = 0; c < C; ++c) {
        const double s = sigmoid(pre[c]);
        dpre[bt * C + c] = double(dy[bt * C + c]) * s * (1.0 + pre[c] * (1.0 - s));
      }
    }
  }
  if (dx) {
    // Gather form, one x row per iteration (no races): x row r feeds outputs t = r - j.
#pragma omp parallel for schedule(static)
    for (i64 br = 0; br < B * rows; ++br) {
      const i64 b = br / rows, r = br % rows;
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int j = 0; j < W; ++j) {
          const i64 t = r - j;
          if (t >= 0 && t < T_len) s += double(w[c * W + j]) * dpre[(b * T_len + t) * C + c];
        }
        dx[br * C + c] = T(s);
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
      std::vector<double> acc(static_cast<std::size_t>((c1 - c0) * W), 0.0);
      for (i64 b = 0; b < B; ++b)
        for (i64 t = 0; t < T_len; ++t) {
          const double* dp = &dpre[(b * T_len + t) * C];
          for (int j = 0; j < W; ++j) {
            const T* xr = x + (b * rows + t + j) * C;
            for (int c = c0; c < c1; ++c) acc[(c - c0) * W + j] += dp[c] * double(xr[c]);
          }
        }
      for (int c = c0; c < c1; ++c)
        for (int j = 0; j < W; ++j) dw[c * W + j] += T(acc[(c - c0) * W + j]);
    }
  }
}

template <typename T>
void gdn_gating_forward(const T* b, const T* a, const T* A_log, const T* dt_bias, i64 N, int H,
                        T* beta, T* g) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i)
    for (int h = 0; h < H; ++h) {
      const i64 k = i * H + h;
      beta[k] = T(sigmoid(double(b[k])));
      g[k] = T(-std::exp(double(A_log[h])) * softplus(double(a[k]) + double(dt_bias[h])));
    }
}

template <typename T>
void gdn_gating_backward(const T* b, const T* a, const T* A_log, const T* dt_bias, const T* dbeta,
                         const T* dg, i64 N, int H, T* db, T* da, T* dA_log, T* ddt_bias) {
  // dbeta/db = beta (1 - beta); dg/da = dg/ddt_bias = -exp(A_log) sigmoid(a + dt_bias);
  // dg/dA_log = g. Parameter gradients: partial sums per fixed row block, then the blocks
  // in order.
  const i64 blocks = (N + kRowBlock - 1) / kRowBlock;
  std::vector<double> part(static_cast<std::size_t>(blocks * 2 * H), 0.0);
#pragma omp parallel for schedule(static)
  for (i64 blk = 0; blk < blocks; ++blk) {
    double* pA = &part[blk * 2 * H];
    double* pdt = pA + H;
    for (i64 i = blk * kRowBlock; i < std::min(N, (blk + 1) * kRowBlock); ++i)
      for (int h = 0; h < H; ++h) {
        const i64 k = i * H + h;
        if (db) {
          const double s = sigmoid(double(b[k]));
          db[k] = T(double(dbeta[k]) * s * (1.0 - s));
        }
        const double x = double(a[k]) + double(dt_bias[h]), e = std::exp(double(A_log[h]));
        const double dx = double(dg[k]) * -e * sigmoid(x);  // d/d(a + dt_bias)
        if (da) da[k] = T(dx);
        pdt[h] += dx;
        pA[h] += double(dg[k]) * -e * softplus(x);
      }
  }
  for (int h = 0; h < H; ++h) {
    double sA = 0, sdt = 0;
    for (i64 blk = 0; blk < blocks; ++blk) {
      sA += part[blk * 2 * H + h];
      sdt += part[blk * 2 * H + H + h];
    }
    if (dA_log) dA_log[h] += T(sA);
    if (ddt_bias) ddt_bias[h] += T(sdt);
  }
}

#define GDN_OPS_GDN_INSTANTIATE(T)                                                                 \
  template void causal_conv_silu_forward<T>(const T*, const T*, int, i64, int, int, T*);           \
  template void causal_conv_silu_backward<T>(const T*, const T*, const T*, int, i64, int, int, T*, \
                                             T*);                                                  \
  template void gdn_gating_forward<T>(const T*, const T*, const T*, const T*, i64, int, T*, T*);   \
  template void gdn_gating_backward<T>(const T*, const T*, const T*, const T*, const T*, const T*, \
                                       i64, int, T*, T*, T*, T*);

GDN_OPS_GDN_INSTANTIATE(float)
GDN_OPS_GDN_INSTANTIATE(double)

}  // namespace gdn::ops
