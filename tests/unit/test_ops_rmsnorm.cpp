// Tests src/ops/rmsnorm and src/ops/gated_rmsnorm on the host: by hand, against finite
// differences, the overwrite / accumulate conventions, float against double.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "ops_support.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

// ---------------------------------------------------------------------------------------
// RMSNorm

TEST_CASE("rmsnorm forward by hand", "[layers]") {
  const Vec x = {3, 4};
  Vec y(2);
  const Vec w0 = {0, 0};
  ops::rmsnorm_forward(Host{}, x.data(), w0.data(), 1, 2, 0.0, y.data());
  check_close(y, {0.848528137423857, 1.131370849898476});
  const Vec w = {1, -0.5};  // scale 1 + w = (2, 0.5)
  ops::rmsnorm_forward(Host{}, x.data(), w.data(), 1, 2, 0.0, y.data());
  check_close(y, {2 * 0.848528137423857, 0.5 * 1.131370849898476});
}

TEST_CASE("rmsnorm backward matches finite differences", "[layers]") {
  const std::int64_t N = 5;
  const int d = 7;
  const double eps = 1e-6;
  Vec x = rand_vec(N * d, 12), w = rand_vec(d, 13, 0.3), r = rand_vec(N * d, 14);
  auto loss = [&] {
    Vec y(N * d);
    ops::rmsnorm_forward(Host{}, x.data(), w.data(), N, d, eps, y.data());
    return dot(y, r);
  };
  Vec dx(N * d), dw(d, 0.0);
  ops::rmsnorm_backward(Host{}, x.data(), w.data(), r.data(), N, d, eps, dx.data(), dw.data());
  check_grad("dx", dx, x, loss);
  check_grad("dw", dw, w, loss);

  Vec dx2(N * d, 123.0), dw2 = dw;
  ops::rmsnorm_backward(Host{}, x.data(), w.data(), r.data(), N, d, eps, dx2.data(), dw2.data());
  CHECK(dx2 == dx);
  for (int j = 0; j < d; ++j) CHECK(dw2[j] == 2 * dw[j]);
}

// ---------------------------------------------------------------------------------------
// Gated RMSNorm

TEST_CASE("gated rmsnorm forward by hand", "[layers]") {
  const Vec x = {3, 4}, z = {2, -1}, w = {1, 2};
  Vec y(2);
  ops::gated_rmsnorm_forward(Host{}, x.data(), z.data(), w.data(), 1, 2, 0.0, y.data());
  check_close(y, {1.4947622080498966, -0.6085449689365511}, 1e-14);
}

TEST_CASE("gated rmsnorm backward matches finite differences", "[layers]") {
  const std::int64_t N = 5;
  const int d = 7;
  const double eps = 1e-6;
  Vec x = rand_vec(N * d, 15), z = rand_vec(N * d, 16, 2.0), w = rand_vec(d, 17),
      r = rand_vec(N * d, 18);
  auto loss = [&] {
    Vec y(N * d);
    ops::gated_rmsnorm_forward(Host{}, x.data(), z.data(), w.data(), N, d, eps, y.data());
    return dot(y, r);
  };
  Vec dx(N * d), dz(N * d), dw(d, 0.0);
  ops::gated_rmsnorm_backward(Host{}, x.data(), z.data(), w.data(), r.data(), N, d, eps, dx.data(),
                              dz.data(), dw.data());
  check_grad("dx", dx, x, loss);
  check_grad("dz", dz, z, loss);
  check_grad("dw", dw, w, loss);

  Vec dx2(N * d, 123.0), dz2(N * d, -7.0), dw2 = dw;
  ops::gated_rmsnorm_backward(Host{}, x.data(), z.data(), w.data(), r.data(), N, d, eps, dx2.data(),
                              dz2.data(), dw2.data());
  CHECK(dx2 == dx);
  CHECK(dz2 == dz);
  for (int j = 0; j < d; ++j) CHECK(dw2[j] == 2 * dw[j]);
}

TEST_CASE("rmsnorm and gated rmsnorm float instantiations agree with double", "[layers]") {
  // A smoke test of every float entry point against the fp64 result.
  const std::int64_t N = 9;
  const int d = 20;
  const Vec x = rand_vec(N * d, 32), z = rand_vec(N * d, 33), w = rand_vec(d, 34, 0.3),
            dy = rand_vec(N * d, 35);
  const auto xf = to<float>(x), zf = to<float>(z), wf = to<float>(w), dyf = to<float>(dy);
  Vec y(N * d), dx(N * d), dz(N * d), dw(d, 0.0);
  std::vector<float> yf(N * d), dxf(N * d), dzf(N * d), dwf(d, 0.f);
  ops::rmsnorm_forward(Host{}, x.data(), w.data(), N, d, 1e-6, y.data());
  ops::rmsnorm_forward(Host{}, xf.data(), wf.data(), N, d, 1e-6, yf.data());
  CHECK(rel_l2(yf.data(), y.data(), y.size()) < 1e-6);
  ops::gated_rmsnorm_backward(Host{}, x.data(), z.data(), w.data(), dy.data(), N, d, 1e-6,
                              dx.data(), dz.data(), dw.data());
  ops::gated_rmsnorm_backward(Host{}, xf.data(), zf.data(), wf.data(), dyf.data(), N, d, 1e-6,
                              dxf.data(), dzf.data(), dwf.data());
  CHECK(rel_l2(dxf.data(), dx.data(), dx.size()) < 1e-5);
  CHECK(rel_l2(dzf.data(), dz.data(), dz.size()) < 1e-5);
  CHECK(rel_l2(dwf.data(), dw.data(), dw.size()) < 1e-5);
}
