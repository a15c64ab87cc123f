// QKNormalizer (src/gdn/l2norm.h) on the device: the same API, device pointers, one
// thread per row.
#pragma once

#include <cstdint>

#include "cuda/device_vector.h"
#include "gdn/problem.h"

namespace gdn {

template <typename T>
class CudaQKNormalizer {
 public:
  CudaQKNormalizer(const GdnProblem& p, std::int64_t tokens, const GdnTensors<T>& in);
  const GdnTensors<T>& view() const { return view_; }
  void backward(T* dq, T* dk) const;

 private:
  GdnTensors<T> in_, view_;
  std::int64_t rows_;
  int dim_;
  bool on_;
  DeviceVector<T> qn_, kn_;
};

}  // namespace gdn
