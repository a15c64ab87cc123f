#include "ops/convert/convert.h"

namespace gdn::ops {

void to_float(Host, const Bf16* x, std::int64_t n, float* y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) y[i] = gdn::to_float(x[i]);
}

void to_bf16(Host, const float* x, std::int64_t n, Bf16* y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) y[i] = gdn::to_bf16(x[i]);
}

template <typename T>
void round_to_bf16(Host, T* x, std::int64_t n) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) x[i] = T(round_bf16(x[i]));
}

template void round_to_bf16(Host, float*, std::int64_t);
template void round_to_bf16(Host, double*, std::int64_t);

}  // namespace gdn::ops
