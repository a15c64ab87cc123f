// Helpers of the GPU tests (CUDA builds): device copies of host tensors and back, and a
// closeness check against a host reference. The GPU test binaries skip (ctest SKIP, exit
// code 77) where no GPU is visible: see gpu_main.cpp and mpi_main.cpp.
#pragma once

#include <catch2/catch.hpp>
#include <vector>

#include "core/tensor.h"
#include "runtime/cuda_device.h"
#include "test_support.h"

namespace gdn::test {

template <typename T>
double tolerance() {
  return sizeof(T) == 4 ? 1e-4 : 1e-10;
}

// Device copy of x in T; an empty x gives an empty buffer, whose data() is null.
template <typename T, typename S>
DeviceBuffer<T> on_gpu(const Tensor<S>& x) {
  const Tensor<T> c = cast<T>(x);
  return to_device<Cuda>(c.ptr(), c.data.size());
}
template <typename T, typename S>
DeviceBuffer<T> on_gpu(const std::vector<S>& x) {
  const std::vector<T> c(x.begin(), x.end());
  return to_device<Cuda>(c.data(), c.size());
}

template <typename T>
std::vector<double> from_gpu(const DeviceBuffer<T>& d) {
  const std::vector<T> h = to_host<Cuda>(d);
  return std::vector<double>(h.begin(), h.end());
}

template <typename T>
void check_close(const char* what, const DeviceBuffer<T>& got, const double* want, std::size_t n,
                 double tol = tolerance<T>()) {
  INFO(what);
  REQUIRE(got.size() == n);
  CHECK(rel_l2(from_gpu(got).data(), want, n) <= tol);
}
template <typename T>
void check_close(const char* what, const DeviceBuffer<T>& got, const Tensor<double>& want,
                 double tol = tolerance<T>()) {
  check_close(what, got, want.ptr(), want.data.size(), tol);
}

}  // namespace gdn::test
