// la::gemm against a naive GEMM that follows its rounding rule (gemm.h: one FMA chain per
// element over p = 0 .. k - 1, then C = beta C + alpha acc), for every transpose pair,
// every Structure hint, leading dimensions larger than the rows, and sizes around the
// register tile and the vector width (the tails), on every GEMM path the CPU runs. With
// hardware FMA the two agree bit for bit; without it, to rounding. And the FMA peak
// microbenchmark's record and its restoring of the threads' CPU affinity (its rates are
// timings: not asserted).
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ops/gemm/exp.h"
#include "ops/gemm/fma_peak.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_path.h"
#include "ops/gemm/transpose.h"

#if defined(__linux__)
#include <sched.h>
#endif

using namespace gdn;

namespace {

template <typename T>
void check_gemm() {
  Rng rng(3);
  int checked = 0;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const Structure s :
           {Structure::kDense, Structure::kLowerA, Structure::kUpperA, Structure::kLowerC})
        for (const int m : {1, 5, 8, 13, 64})
          for (const int n : {1, 7, 16, 17, 33, 64, 128})
            for (const int k : {1, 9, 16, 31, 64}) {
              const bool tri_a = s == Structure::kLowerA || s == Structure::kUpperA;
              if (tri_a && k != m) continue;
              const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
              std::vector<T> A(std::size_t(ta ? k : m) * lda), B(std::size_t(tb ? n : k) * ldb),
                  C(std::size_t(m) * ldc);
              for (auto* x : {&A, &B, &C})
                for (T& e : *x) e = T(rng.normal());
              auto a = [&](int i, int p) -> T& { return ta ? A[p * lda + i] : A[i * lda + p]; };
              for (int i = 0; i < m; ++i)
                for (int p = 0; p < k; ++p)
                  if ((s == Structure::kLowerA && p > i) || (s == Structure::kUpperA && p < i))
                    a(i, p) = 0;
              const T alpha = T(0.7), beta = (m + n) % 3 == 0 ? T(0) : m % 2 ? T(1) : T(-0.3);
              std::vector<T> want = C;
              for (int i = 0; i < m; ++i)
                for (int j = 0; j < n; ++j) {
                  T acc = 0;
                  for (int p = 0; p < k; ++p)
                    acc = simd::kHardwareFma
                              ? std::fma(a(i, p), tb ? B[j * ldb + p] : B[p * ldb + j], acc)
                              : acc + a(i, p) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
                  T& c = want[i * ldc + j];
                  const T x = alpha * acc;
                  c = beta == T(0) ? x : beta == T(1) ? c + x : beta * c + x;
                }
              la::gemm<T>(ta, tb, m, n, k, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc,
                          s);
              for (int i = 0; i < m; ++i)
                for (int j = 0; j < n + 2; ++j) {  // the padding columns stay untouched
                  if (s == Structure::kLowerC && j > i && j < n) continue;
                  const T got = C[i * ldc + j], ref = want[i * ldc + j];
                  INFO("ta " << ta << " tb " << tb << " s " << int(s) << " m " << m << " n " << n
                             << " k " << k << " at " << i << ", " << j);
                  if (simd::kHardwareFma)
                    REQUIRE(got == ref);
                  else
                    REQUIRE(std::abs(got - ref) <= T(1e-5) * (1 + std::abs(ref)));
                }
              ++checked;
            }
  CHECK(checked > 1000);
}

}  // namespace

// On every GEMM path this CPU runs (gemm_path.h): the rule, hence the same bits on all.
TEMPLATE_TEST_CASE("la::gemm follows its rounding rule for every layout and structure", "[gemm]",
                   float, double) {
  const la::GemmPath before = la::gemm_path();
  for (const la::GemmPath p : la::gemm_paths()) {
    INFO("GEMM path " << la::gemm_path_name(p));
    la::set_gemm_path(p);
    check_gemm<TestType>();
  }
  la::set_gemm_path(before);
}

#if defined(__linux__)
// Each OpenMP thread's affinity mask, as a string of 0s and 1s.
static std::vector<std::string> thread_masks() {
  std::vector<std::string> masks(omp_get_max_threads());
#pragma omp parallel
  {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    std::string m(CPU_SETSIZE, '0');
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) m[c] = '1';
    masks[omp_get_thread_num()] = m;
  }
  return masks;
}

// The peak pins every thread to a CPU of its own while it measures; the kernels timed
// after it in gdn_bench run on the same threads and must not inherit that.
TEST_CASE("measure_fma_peak leaves every thread's CPU affinity as it found it", "[gemm]") {
  const std::vector<std::string> before = thread_masks();
  const la::FmaPeak p = la::measure_fma_peak<float>(0.02);
  CHECK(thread_masks() == before);
  CHECK(p.threads == omp_get_max_threads());
  CHECK(p.lanes == la::gemm_lanes<float>());
  CHECK(p.windows > 0);
  CHECK(p.gflops_one > 0);
  CHECK(p.gflops >= p.gflops_median);
  CHECK(p.gflops_median > 0);
}
#endif

// la::exp_in_place in float against std::exp in double: within 3 ulp of the rounded true
// value over the whole range a softmax meets, exact zeros below -87 (and for -inf), NaN
// kept, and a value's result the same wherever it sits in the row (vector body or tail).
TEST_CASE("la::exp_in_place is within 3 ulp and independent of position", "[gemm][exp]") {
  std::vector<float> x;
  for (float t = -90.0f; t <= 88.0f; t += 0.0137f) x.push_back(t);
  for (float t : {0.0f, -0.0f, 1e-8f, -1e-8f, -87.0f, 88.0f}) x.push_back(t);
  std::vector<float> y = x;
  la::exp_in_place(y.data(), int(y.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("x = " << x[i]);
    if (x[i] < -87.0f) {
      CHECK(y[i] == 0.0f);
      continue;
    }
    const float want = float(std::exp(double(x[i])));
    CHECK(std::fabs(y[i] - want) <= 3 * (std::nextafter(want, INFINITY) - want));
  }
  float special[3] = {-INFINITY, NAN, 1.0f};
  la::exp_in_place(special, 3);
  CHECK(special[0] == 0.0f);
  CHECK(std::isnan(special[1]));
  for (int n = 1; n <= 37; ++n) {  // every row length: tails of every size
    std::vector<float> row(x.begin() + 500, x.begin() + 500 + n);
    la::exp_in_place(row.data(), n);
    for (int i = 0; i < n; ++i) CHECK(row[i] == y[500 + i]);
  }
}

TEMPLATE_TEST_CASE("la::transpose moves every element, vector blocks and edges alike", "[gemm]",
                   float, double) {
  using T = TestType;
  // Sizes around the 8 x 8 vector block and the 16 x 16 scalar tile, with padded strides.
  for (const auto& [rows, cols] : std::vector<std::pair<int, int>>{
           {1, 1}, {8, 8}, {7, 9}, {16, 24}, {33, 17}, {64, 5}, {3, 70}}) {
    const std::int64_t lds = cols + 3, ldd = rows + 5;
    std::vector<T> src(std::size_t(rows) * lds), dst(std::size_t(cols) * ldd, T(-1));
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = T(i);
    la::transpose<T>(rows, cols, src.data(), lds, dst.data(), ldd);
    INFO("rows " << rows << " cols " << cols);
    for (int c = 0; c < cols; ++c)
      for (int r = 0; r < ldd; ++r)  // the padding is untouched
        REQUIRE(dst[std::size_t(c) * ldd + r] ==
                (r < rows ? src[std::size_t(r) * lds + c] : T(-1)));
  }
}
