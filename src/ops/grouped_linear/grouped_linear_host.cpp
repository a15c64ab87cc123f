// The grouped expert linears on the host: one linear op per non-empty expert, in expert
// order, so the numbers are those of the per-expert loop MoeMlp ran before (bit for bit).
#include <cstdint>

#include "core/error.h"
#include "ops/grouped_linear/grouped_library.h"
#include "ops/grouped_linear/grouped_linear.h"
#include "ops/linear/linear.h"

namespace gdn::ops {

using i64 = std::int64_t;

namespace {
GroupedKernel chosen_kernel = GroupedKernel::library;
}  // namespace

void set_grouped_kernel(GroupedKernel k) {
  chosen_kernel = k;
}
GroupedKernel grouped_kernel() {
  return chosen_kernel;
}

void check_grouped_offsets(const i64* offsets, int E, i64 R) {
  GDN_CHECK(E >= 1 && offsets[0] == 0 && offsets[E] == R, "grouped linear: offsets [", offsets[0],
            ", ", offsets[E], "] of ", E, " experts do not span the ", R, " rows");
  for (int e = 0; e < E; ++e)
    GDN_CHECK(offsets[e] <= offsets[e + 1], "grouped linear: expert ", e, " has ",
              offsets[e + 1] - offsets[e], " rows");
}

template <typename T>
void grouped_linear_forward(Host, Precision p, const T* x, const T* W, i64 w_stride,
                            const i64* offsets, int E, i64 R, int in, int out, T* y) {
  check_grouped_offsets(offsets, E, R);
  for (int e = 0; e < E; ++e) {
    const i64 o = offsets[e], n = offsets[e + 1] - o;
    if (n > 0) linear_forward(Host{}, p, x + o * in, W + e * w_stride, n, in, out, y + o * out);
  }
}

template <typename T>
void grouped_linear_backward(Host, Precision p, const T* x, const T* W, i64 w_stride, const T* dy,
                             const i64* offsets, int E, i64 R, int in, int out, T* dx, T* dW,
                             bool accumulate) {
  check_grouped_offsets(offsets, E, R);
  for (int e = 0; e < E; ++e) {
    const i64 o = offsets[e], n = offsets[e + 1] - o;
    if (n > 0)
      linear_backward(Host{}, p, x + o * in, W + e * w_stride, dy + o * out, n, in, out,
                      dx ? dx + o * in : nullptr, dW ? dW + e * w_stride : nullptr, accumulate);
  }
}

template void grouped_linear_forward(Host, Precision, const float*, const float*, i64, const i64*,
                                     int, i64, int, int, float*);
template void grouped_linear_forward(Host, Precision, const double*, const double*, i64, const i64*,
                                     int, i64, int, int, double*);
template void grouped_linear_backward(Host, Precision, const float*, const float*, i64,
                                      const float*, const i64*, int, i64, int, int, float*, float*,
                                      bool);
template void grouped_linear_backward(Host, Precision, const double*, const double*, i64,
                                      const double*, const i64*, int, i64, int, int, double*,
                                      double*, bool);

}  // namespace gdn::ops
