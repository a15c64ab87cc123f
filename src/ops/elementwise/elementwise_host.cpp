// Element-wise ops on the host.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/elementwise/elementwise.h"
#include "ops/host_util.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

template <typename T>
void add(Host, T* y, const T* a, const T* b, i64 n) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

template <typename T>
void sigmoid_gate_forward(Host, const T* x, const T* g, i64 n, T* y) {
  for_sigmoid_blocks(g, n, [&](i64 i0, int m, const T* s) {
    for (int j = 0; j < m; ++j) y[i0 + j] = x[i0 + j] * s[j];
  });
}

template <typename T>
void sigmoid_gate_backward(Host, const T* x, const T* g, const T* dy, i64 n, T* dx, T* dg) {
  for_sigmoid_blocks(g, n, [&](i64 i0, int m, const T* s) {
    for (int j = 0; j < m; ++j) {
      const i64 i = i0 + j;
      if (dx) dx[i] = dy[i] * s[j];
      if (dg) dg[i] = dy[i] * x[i] * s[j] * (T(1) - s[j]);
    }
  });
}

template void add(Host, float*, const float*, const float*, std::int64_t);
template void add(Host, double*, const double*, const double*, std::int64_t);
template void sigmoid_gate_forward(Host, const float*, const float*, std::int64_t, float*);
template void sigmoid_gate_forward(Host, const double*, const double*, std::int64_t, double*);
template void sigmoid_gate_backward(Host, const float*, const float*, const float*, std::int64_t,
                                    float*, float*);
template void sigmoid_gate_backward(Host, const double*, const double*, const double*, std::int64_t,
                                    double*, double*);

}  // namespace gdn::ops
