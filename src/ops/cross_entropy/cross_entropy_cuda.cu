// Cross-entropy on the GPU: one block per row, a shared-memory tree reduction; then one
// block adds the rows' losses in row order and looks for an invalid target, so nothing
// comes back to the host until the caller reads the total.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/cuda_util.cuh"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

__device__ inline bool valid_target(std::int32_t t, int V) {
  return (t >= 0 && t < V) || t == kIgnoreTarget;
}

template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const std::int32_t* targets, i64 N, int V,
                                     double grad_scale, T* dlogits, double* row_loss) {
  __shared__ double red[kThreads];
  for (i64 i = blockIdx.x; i < N; i += gridDim.x) {
    const int t = targets[i];
    // Ignored, or invalid (add_rows_kernel reports it): the whole block takes this branch,
    // so no barrier is skipped.
    if (t < 0 || t >= V) {
      if (threadIdx.x == 0) row_loss[i] = 0;
      if (dlogits)
        for (int j = int(threadIdx.x); j < V; j += int(blockDim.x)) dlogits[i * V + j] = T(0);
      continue;
    }
    const T* l = logits + i * V;
    double mx = -INFINITY;
    for (int j = int(threadIdx.x); j < V; j += int(blockDim.x)) mx = ::fmax(mx, double(l[j]));
    mx = block_reduce(mx, red, MaxOp{});
    double s = 0;
    for (int j = int(threadIdx.x); j < V; j += int(blockDim.x)) s += ::exp(double(l[j]) - mx);
    s = block_reduce(s, red, SumOp{});
    const double lse = mx + ::log(s);
    if (threadIdx.x == 0) row_loss[i] = lse - double(l[t]);
    // The model computes dlogits in place (dlogits == logits): thread 0 must read l[t]
    // before any thread overwrites it.
    __syncthreads();
    if (!dlogits) continue;
    T* dl = dlogits + i * V;
    for (int j = int(threadIdx.x); j < V; j += int(blockDim.x)) {
      const T p = T(::exp(double(l[j]) - lse) * grad_scale);
      dl[j] = j == t ? T(double(p) - grad_scale) : p;
    }
  }
}

// One block: total->loss += the N row losses summed serially in row order (the host's
// order), and the first invalid target recorded unless one already is. The threads stage
// kThreads rows at a time in shared memory; thread 0 walks them.
__global__ void add_rows_kernel(const double* row_loss, const std::int32_t* targets, i64 N, int V,
                                i64 row0, CrossEntropyTotal* total) {
  __shared__ double loss[kThreads];
  __shared__ std::int32_t tgt[kThreads];
  double sum = 0;  // thread 0's
  for (i64 base = 0; base < N; base += kThreads) {
    const i64 i = base + threadIdx.x;
    if (i < N) {
      loss[threadIdx.x] = row_loss[i];
      tgt[threadIdx.x] = targets[i];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const int n = int(N - base < kThreads ? N - base : kThreads);
      for (int j = 0; j < n; ++j) {
        sum += loss[j];
        if (!total->bad && !valid_target(tgt[j], V))
          *total = {total->loss, row0 + base + j, tgt[j], 1};
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) total->loss += sum;
}

}  // namespace

template <typename T>
void cross_entropy_add(Cuda, const T* logits, const std::int32_t* targets, i64 N, int V,
                       double grad_scale, T* dlogits, i64 row0, CrossEntropyTotal* total) {
  if (N == 0) return;
  Scratch<double> row_loss{std::size_t(N)};
  cross_entropy_kernel<T><<<int(std::min<i64>(N, kMaxBlocks)), kThreads>>>(
      logits, targets, N, V, grad_scale, dlogits, row_loss.get());
  check_launch();
  add_rows_kernel<<<1, kThreads>>>(row_loss.get(), targets, N, V, row0, total);
  check_launch();
}

template <typename T>
double cross_entropy(Cuda, const T* logits, const std::int32_t* targets, i64 N, int V,
                     double grad_scale, T* dlogits) {
  DeviceBuffer<CrossEntropyTotal> total(1);  // zeros: nothing yet
  cross_entropy_add(Cuda{}, logits, targets, N, V, grad_scale, dlogits, 0, total.data());
  CrossEntropyTotal h;
  Cuda::download(&h, total.data(), 1);
  check_targets(h, V);
  return h.loss;
}

template double cross_entropy(Cuda, const float*, const std::int32_t*, std::int64_t, int, double,
                              float*);
template double cross_entropy(Cuda, const double*, const std::int32_t*, std::int64_t, int, double,
                              double*);
template void cross_entropy_add(Cuda, const float*, const std::int32_t*, std::int64_t, int, double,
                                float*, std::int64_t, CrossEntropyTotal*);
template void cross_entropy_add(Cuda, const double*, const std::int32_t*, std::int64_t, int, double,
                                double*, std::int64_t, CrossEntropyTotal*);

}  // namespace gdn::ops
