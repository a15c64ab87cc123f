// The GDN gating on the GPU; parameter gradients by the deterministic column sums.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "ops/cuda_util.cuh"
#include "ops/gating/gating.h"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void gating_forward_kernel(const T* b, const T* a, const T* A_log, const T* dt_bias,
                                      i64 N, int H, T* beta, T* g) {
  for (i64 k = thread_index(); k < N * H; k += thread_stride()) {
    const int h = int(k % H);
    beta[k] = T(sigmoid_d(double(b[k])));
    g[k] = T(-::exp(double(A_log[h])) * softplus_d(double(a[k]) + double(dt_bias[h])));
  }
}

template <typename T>
__global__ void gating_backward_kernel(const T* b, const T* a, const T* A_log, const T* dt_bias,
                                       const T* dbeta, const T* dg, i64 N, int H, T* db, T* da) {
  for (i64 k = thread_index(); k < N * H; k += thread_stride()) {
    const int h = int(k % H);
    if (db) {
      const double s = sigmoid_d(double(b[k]));
      db[k] = T(double(dbeta[k]) * s * (1.0 - s));
    }
    if (da) {
      const double x = double(a[k]) + double(dt_bias[h]), e = ::exp(double(A_log[h]));
      da[k] = T(double(dg[k]) * -e * sigmoid_d(x));
    }
  }
}

// Columns [0, H): dA_log; [H, 2H): ddt_bias. Rows are tokens.
template <typename T>
struct GatingDparams {
  const T *a, *A_log, *dt_bias, *dg;
  int H;
  T *dA_log, *ddt_bias;
  __device__ double operator()(i64 i, int col) const {
    const int h = col < H ? col : col - H;
    const i64 k = i * H + h;
    const double x = double(a[k]) + double(dt_bias[h]), e = ::exp(double(A_log[h]));
    return col < H ? double(dg[k]) * -e * softplus_d(x) : double(dg[k]) * -e * sigmoid_d(x);
  }
  __device__ void add(int col, double s) const {
    if (col < H) {
      if (dA_log) dA_log[col] += T(s);
    } else if (ddt_bias) {
      ddt_bias[col - H] += T(s);
    }
  }
};

}  // namespace

template <typename T>
void gdn_gating_forward(Cuda, const T* b, const T* a, const T* A_log, const T* dt_bias, i64 N,
                        int H, T* beta, T* g) {
  if (N * H == 0) return;
  gating_forward_kernel<T><<<blocks_for(N * H), kThreads>>>(b, a, A_log, dt_bias, N, H, beta, g);
  check_launch();
}

template <typename T>
void gdn_gating_backward(Cuda, const T* b, const T* a, const T* A_log, const T* dt_bias,
                         const T* dbeta, const T* dg, i64 N, int H, T* db, T* da, T* dA_log,
                         T* ddt_bias) {
  if (N * H == 0) return;
  if (db || da) {
    gating_backward_kernel<T>
        <<<blocks_for(N * H), kThreads>>>(b, a, A_log, dt_bias, dbeta, dg, N, H, db, da);
    check_launch();
  }
  if (dA_log || ddt_bias)
    column_sums(GatingDparams<T>{a, A_log, dt_bias, dg, H, dA_log, ddt_bias}, N, 2 * H);
}

template void gdn_gating_forward(Cuda, const float*, const float*, const float*, const float*,
                                 std::int64_t, int, float*, float*);
template void gdn_gating_forward(Cuda, const double*, const double*, const double*, const double*,
                                 std::int64_t, int, double*, double*);
template void gdn_gating_backward(Cuda, const float*, const float*, const float*, const float*,
                                  const float*, const float*, std::int64_t, int, float*, float*,
                                  float*, float*);
template void gdn_gating_backward(Cuda, const double*, const double*, const double*, const double*,
                                  const double*, const double*, std::int64_t, int, double*, double*,
                                  double*, double*);

}  // namespace gdn::ops
