// Linear-layer biases on the host.
#include <cstdint>

#include "ops/bias/bias.h"
#include "ops/host_util.h"

namespace gdn::ops {

using i64 = std::int64_t;

template <typename T>
void bias_add(Host, T* y, const T* b, i64 N, int out) {
#pragma omp parallel for schedule(static)
  for (i64 n = 0; n < N; ++n)
    for (int c = 0; c < out; ++c) y[n * out + c] += b[c];
}

template <typename T>
void bias_backward(Host, const T* dy, i64 N, int out, T* db) {
  host::add_column_sums(
      N, out, [&](i64 n, int c) { return double(dy[n * out + c]); }, db);
}

template void bias_add(Host, float*, const float*, std::int64_t, int);
template void bias_add(Host, double*, const double*, std::int64_t, int);
template void bias_backward(Host, const float*, std::int64_t, int, float*);
template void bias_backward(Host, const double*, std::int64_t, int, double*);

}  // namespace gdn::ops
