// SwiGLU on the host.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/host_util.h"
#include "ops/swiglu/swiglu.h"

namespace gdn::ops {

using i64 = std::int64_t;
using namespace host;

template <typename T>
void swiglu_forward(Host, const T* g, const T* u, i64 n, T* y) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < n; ++i) y[i] = g[i] * sigmoid(g[i]) * u[i];
}

template <typename T>
void swiglu_backward(Host, const T* g, const T* u, const T* dy, i64 n, T* dg, T* du) {
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < n; ++i) {
    const T sg = sigmoid(g[i]);
    if (dg) dg[i] = dy[i] * u[i] * sg * (T(1) + g[i] * (T(1) - sg));
    if (du) du[i] = dy[i] * g[i] * sg;
  }
}

template void swiglu_forward(Host, const float*, const float*, std::int64_t, float*);
template void swiglu_forward(Host, const double*, const double*, std::int64_t, double*);
template void swiglu_backward(Host, const float*, const float*, const float*, std::int64_t, float*,
                              float*);
template void swiglu_backward(Host, const double*, const double*, const double*, std::int64_t,
                              double*, double*);

}  // namespace gdn::ops
