// Shared by the host op tests (test_ops_*.cpp, test_attention_ops.cpp): seeded vectors,
// dot products, finite-difference and closeness checks, and an OpenMP thread-count guard.
#pragma once

#include <omp.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "test_support.h"

namespace gdn::test {

using Vec = std::vector<double>;

inline Vec rand_vec(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  Vec v(n);
  for (double& x : v) x = scale * rng.normal();
  return v;
}

inline double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central differences of loss() with respect to every element of x (test_support.h).
inline Vec finite_diff(Vec& x, const std::function<double()>& loss, double eps = 1e-6) {
  return finite_differences(x, loss, eps);
}

// The analytic gradient against central differences, to 1e-7 relative.
inline void check_grad(const char* name, const Vec& analytic, Vec& x,
                       const std::function<double()>& loss) {
  const Vec fd = finite_diff(x, loss);
  const double err = rel_l2(analytic.data(), fd.data(), fd.size());
  INFO(name << " rel err " << err);
  CHECK(err <= 1e-7);
}

inline void check_close(const Vec& got, const Vec& want, double tol = 1e-15) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(tol).margin(tol));
  }
}

template <typename T>
std::vector<T> to(const Vec& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Restores the OpenMP thread count when a test changes it.
struct ThreadGuard {
  int saved = omp_get_max_threads();
  ~ThreadGuard() { omp_set_num_threads(saved); }
};

}  // namespace gdn::test
