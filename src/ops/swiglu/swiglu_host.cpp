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
  for_sigmoid_blocks(g, n, [&](i64 i0, int m, const T* sg) {
    for (int j = 0; j < m; ++j) y[i0 + j] = g[i0 + j] * sg[j] * u[i0 + j];
  });
}

template <typename T>
void swiglu_backward(Host, const T* g, const T* u, const T* dy, i64 n, T* dg, T* du) {
  for_sigmoid_blocks(g, n, [&](i64 i0, int m, const T* sg) {
    for (int j = 0; j < m; ++j) {
      const i64 i = i0 + j;
      if (dg) dg[i] = dy[i] * u[i] * sg[j] * (T(1) + g[i] * (T(1) - sg[j]));
      if (du) du[i] = dy[i] * g[i] * sg[j];
    }
  });
}

template void swiglu_forward(Host, const float*, const float*, std::int64_t, float*);
template void swiglu_forward(Host, const double*, const double*, std::int64_t, double*);
template void swiglu_backward(Host, const float*, const float*, const float*, std::int64_t, float*,
                              float*);
template void swiglu_backward(Host, const double*, const double*, const double*, std::int64_t,
                              double*, double*);

}  // namespace gdn::ops
