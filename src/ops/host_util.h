// Small helpers shared by the host ops (the *_host.cpp files of src/ops).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/gemm/exp.h"

namespace gdn::ops::host {

// Column chunk for reductions over rows that are split by column (dW of the norms, dE):
// a work unit's size depends on the shapes only, so sums are bit-identical for any
// OMP_NUM_THREADS.
inline constexpr int kColChunk = 64;
inline int col_chunks(int d) {
  return (d + kColChunk - 1) / kColChunk;
}

// out[c] += sum over the N rows of term(i, c), c in [0, d): a parameter gradient summed
// over tokens. Columns are split into kColChunk chunks, each summing its rows in order in
// double and adding to out once, so the bits do not depend on the thread count.
template <typename T, typename F>
void add_column_sums(std::int64_t N, int d, F term, T* out) {
  const int chunks = col_chunks(d);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    const int c0 = ch * kColChunk, c1 = std::min(d, c0 + kColChunk);
    double acc[kColChunk] = {};
    for (std::int64_t i = 0; i < N; ++i)
      for (int c = c0; c < c1; ++c) acc[c - c0] += term(i, c);
    for (int c = c0; c < c1; ++c) out[c] += T(acc[c - c0]);
  }
}

template <typename T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
// For each block [i0, i0 + m) of up to kSigmoidBlock of the n gates g, in parallel:
// f(i0, m, s) with s[j] = sigmoid(g[i0 + j]), computed together (la::sigmoid: a vector
// exp for float) into a buffer on the stack.
inline constexpr std::int64_t kSigmoidBlock = 512;
template <typename T, typename F>
void for_sigmoid_blocks(const T* g, std::int64_t n, F&& f) {
  const std::int64_t blocks = (n + kSigmoidBlock - 1) / kSigmoidBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t i0 = b * kSigmoidBlock;
    const int m = int(std::min(kSigmoidBlock, n - i0));
    T s[kSigmoidBlock];
    la::sigmoid(g + i0, m, s);
    f(i0, m, static_cast<const T*>(s));
  }
}
// log(1 + e^x) without overflow; above 20 it equals x to double precision's taste.
inline double softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));
}

// sum_j f(j) for j < d in double: element j into running sum j mod 8, the sums then
// pairwise. One running sum is a chain of d dependent adds (~4 cycles each: 2000 cycles a
// row of 512); eight vectorise and overlap. The order depends on d alone.
template <typename F>
inline double row_sum8(int d, F&& f) {
  double s[8] = {};
  int j = 0;
  for (; j + 8 <= d; j += 8)
    for (int e = 0; e < 8; ++e) s[e] += f(j + e);
  for (; j < d; ++j) s[j % 8] += f(j);
  for (int w = 4; w > 0; w /= 2)
    for (int e = 0; e < w; ++e) s[e] += s[e + w];
  return s[0];
}

// 1 / sqrt(mean(x^2) + eps) of one row, accumulated in double.
template <typename T>
inline double inv_rms(const T* x, int d, double eps) {
  const double s = row_sum8(d, [&](int j) { return double(x[j]) * double(x[j]); });
  return 1.0 / std::sqrt(s / d + eps);
}

}  // namespace gdn::ops::host
