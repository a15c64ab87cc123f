// The GDN gating on the host. Parameter gradients: partial sums per fixed row block, then
// the blocks in order (bit-identical for any OMP_NUM_THREADS).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/gating/gating.h"
#include "ops/host_util.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

namespace {

constexpr i64 kRowBlock = 1024;  // rows per partial sum of the gating parameter gradients

}  // namespace

template <typename T>
void gdn_gating_forward(Host, const T* b, const T* a, const T* A_log, const T* dt_bias, i64 N,
                        int H, T* beta, T* g) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i)
    for (int h = 0; h < H; ++h) {
      const i64 k = i * H + h;
      beta[k] = T(sigmoid(double(b[k])));
      g[k] = T(-std::exp(double(A_log[h])) * softplus(double(a[k]) + double(dt_bias[h])));
    }
}

template <typename T>
void gdn_gating_backward(Host, const T* b, const T* a, const T* A_log, const T* dt_bias,
                         const T* dbeta, const T* dg, i64 N, int H, T* db, T* da, T* dA_log,
                         T* ddt_bias) {
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

template void gdn_gating_forward(Host, const float*, const float*, const float*, const float*,
                                 std::int64_t, int, float*, float*);
template void gdn_gating_forward(Host, const double*, const double*, const double*, const double*,
                                 std::int64_t, int, double*, double*);
template void gdn_gating_backward(Host, const float*, const float*, const float*, const float*,
                                  const float*, const float*, std::int64_t, int, float*, float*,
                                  float*, float*);
template void gdn_gating_backward(Host, const double*, const double*, const double*, const double*,
                                  const double*, const double*, std::int64_t, int, double*, double*,
                                  double*, double*);

}  // namespace gdn::ops
