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
  for (i64 i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

GDN_INSTANTIATE_ON(GDN_ELEMENTWISE_OPS, Host)

}  // namespace gdn::ops
