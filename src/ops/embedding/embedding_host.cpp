// Token embedding on the host.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/embedding/embedding.h"
#include "ops/host_util.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

namespace {
void check_tokens(const std::int32_t* tokens, i64 N, int vocab) {
  for (i64 i = 0; i < N; ++i)
    GDN_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "token id ", tokens[i], " at row ", i,
              " is out of range [0, ", vocab, ")");
}
}  // namespace

template <typename T>
void embedding_forward(Host, const std::int32_t* tokens, const T* E, i64 N, int vocab, int d,
                       T* y) {
  check_tokens(tokens, N, vocab);  // before the parallel region: exceptions cannot leave it
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < N; ++i) std::copy_n(E + i64(tokens[i]) * d, d, y + i * d);
}

template <typename T>
void embedding_backward(Host, const std::int32_t* tokens, const T* dy, i64 N, int vocab, int d,
                        T* dE) {
  check_tokens(tokens, N, vocab);
  // Repeated tokens add into the same row: split by columns, each chunk walks all tokens
  // in order, so there are no races and the summation order is fixed.
  const int chunks = col_chunks(d);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    const int c0 = ch * kColChunk, c1 = std::min(d, c0 + kColChunk);
    for (i64 i = 0; i < N; ++i) {
      T* e = dE + i64(tokens[i]) * d;
      const T* g = dy + i * d;
      for (int c = c0; c < c1; ++c) e[c] += g[c];
    }
  }
}

template void embedding_forward(Host, const std::int32_t*, const float*, std::int64_t, int, int,
                                float*);
template void embedding_forward(Host, const std::int32_t*, const double*, std::int64_t, int, int,
                                double*);
template void embedding_backward(Host, const std::int32_t*, const float*, std::int64_t, int, int,
                                 float*);
template void embedding_backward(Host, const std::int32_t*, const double*, std::int64_t, int, int,
                                 double*);

}  // namespace gdn::ops
