// Token embedding on the GPU. The gradient groups rows by token on the host (stable, so each
// token's rows stay in order), then one thread per (token, column) adds them in row
// order: the same additions as the host loop, bit for bit.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "ops/cuda_util.cuh"
#include "ops/embedding/embedding.h"
#include "runtime/cuda_check.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

template <typename T>
__global__ void embedding_forward_kernel(const std::int32_t* tokens, const T* E, i64 N, int d,
                                         T* y) {
  for (i64 k = thread_index(); k < N * d; k += thread_stride()) {
    const i64 i = k / d;
    const int c = int(k % d);
    y[k] = E[i64(tokens[i]) * d + c];
  }
}

// Token u of U distinct ones: rows[start[u] .. start[u + 1]) in ascending order.
template <typename T>
__global__ void embedding_backward_kernel(const i64* start, const i64* rows, const i64* tok, i64 U,
                                          const T* dy, int d, T* dE) {
  for (i64 k = thread_index(); k < U * d; k += thread_stride()) {
    const i64 u = k / d;
    const int c = int(k % d);
    T* e = dE + tok[u] * d + c;
    T acc = *e;
    for (i64 p = start[u]; p < start[u + 1]; ++p) acc += dy[rows[p] * d + c];
    *e = acc;
  }
}

}  // namespace

template <typename T>
void embedding_forward(Cuda, const std::int32_t* tokens, const T* E, i64 N, int vocab, int d,
                       T* y) {
  check_tokens(ids_to_host(tokens, N), vocab);
  if (N == 0 || d == 0) return;
  embedding_forward_kernel<T><<<blocks_for(N * d), kThreads>>>(tokens, E, N, d, y);
  check_launch();
}

template <typename T>
void embedding_backward(Cuda, const std::int32_t* tokens, const T* dy, i64 N, int vocab, int d,
                        T* dE) {
  const std::vector<std::int32_t> tok = ids_to_host(tokens, N);
  check_tokens(tok, vocab);
  if (N == 0 || d == 0) return;
  // Rows grouped by token, each group in row order (stable sort): one buffer holding
  // start [U + 1], rows [N], token [U].
  std::vector<i64> order(static_cast<std::size_t>(N));
  std::iota(order.begin(), order.end(), i64(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](i64 a, i64 b) { return tok[std::size_t(a)] < tok[std::size_t(b)]; });
  std::vector<i64> start, uniq;
  for (std::size_t p = 0; p < order.size(); ++p)
    if (p == 0 || tok[std::size_t(order[p])] != tok[std::size_t(order[p - 1])]) {
      start.push_back(i64(p));
      uniq.push_back(tok[std::size_t(order[p])]);
    }
  const i64 U = i64(uniq.size());
  start.push_back(N);
  std::vector<i64> packed;
  packed.reserve(start.size() + order.size() + uniq.size());
  packed.insert(packed.end(), start.begin(), start.end());
  packed.insert(packed.end(), order.begin(), order.end());
  packed.insert(packed.end(), uniq.begin(), uniq.end());
  Scratch<i64> dev{packed.size()};
  GDN_CUDA_CHECK(
      cudaMemcpy(dev.get(), packed.data(), packed.size() * sizeof(i64), cudaMemcpyHostToDevice));
  const i64* d_start = dev.get();
  const i64* d_rows = d_start + (U + 1);
  const i64* d_tok = d_rows + N;
  embedding_backward_kernel<T>
      <<<blocks_for(U * d), kThreads>>>(d_start, d_rows, d_tok, U, dy, d, dE);
  check_launch();
}

template void embedding_forward(Cuda, const std::int32_t*, const float*, std::int64_t, int, int,
                                float*);
template void embedding_forward(Cuda, const std::int32_t*, const double*, std::int64_t, int, int,
                                double*);
template void embedding_backward(Cuda, const std::int32_t*, const float*, std::int64_t, int, int,
                                 float*);
template void embedding_backward(Cuda, const std::int32_t*, const double*, std::int64_t, int, int,
                                 double*);

}  // namespace gdn::ops
