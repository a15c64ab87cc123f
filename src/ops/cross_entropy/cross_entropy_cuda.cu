// Cross-entropy on the GPU: one block per row, a shared-memory tree reduction.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/cuda_util.cuh"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const std::int32_t* targets, i64 N, int V,
                                     double grad_scale, T* dlogits, double* row_loss) {
  __shared__ double red[kThreads];
  for (i64 i = blockIdx.x; i < N; i += gridDim.x) {
    const int t = targets[i];
    if (t == kIgnoreTarget) {  // the whole block takes this branch: no barrier is skipped
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

}  // namespace

template <typename T>
double cross_entropy(Cuda, const T* logits, const std::int32_t* targets, i64 N, int V,
                     double grad_scale, T* dlogits) {
  const std::vector<std::int32_t> tgt = ids_to_host(targets, N);
  for (std::size_t i = 0; i < tgt.size(); ++i)
    GDN_CHECK((tgt[i] >= 0 && tgt[i] < V) || tgt[i] == kIgnoreTarget, "cross_entropy: target ",
              tgt[i], " at row ", i, " is out of range [0, ", V, ") and not the ignored ",
              kIgnoreTarget);
  if (N == 0) return 0.0;
  Scratch<double> row_loss{std::size_t(N)};
  cross_entropy_kernel<T><<<int(std::min<i64>(N, kMaxBlocks)), kThreads>>>(
      logits, targets, N, V, grad_scale, dlogits, row_loss.get());
  check_launch();
  std::vector<double> h(static_cast<std::size_t>(N));
  GDN_CUDA_CHECK(
      cudaMemcpy(h.data(), row_loss.get(), h.size() * sizeof(double), cudaMemcpyDeviceToHost));
  double total = 0;  // serially in row order, as the host does
  for (double v : h) total += v;
  return total;
}

template double cross_entropy(Cuda, const float* logits, const std::int32_t* targets,
                              std::int64_t N, int V, double grad_scale, float* dlogits);
template double cross_entropy(Cuda, const double* logits, const std::int32_t* targets,
                              std::int64_t N, int V, double grad_scale, double* dlogits);

}  // namespace gdn::ops
