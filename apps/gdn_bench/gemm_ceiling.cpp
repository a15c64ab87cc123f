// The GEMM ceiling (gemm_ceiling.h). OpenBLAS is reached through its Fortran symbols,
// declared here, so no header path of one packaging of it is needed.
#include "gdn_bench/gemm_ceiling.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <functional>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "ops/linear/linear.h"

#if GDN_HAVE_BLAS
extern "C" {
void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
            const float* alpha, const float* A, const int* lda, const float* B, const int* ldb,
            const float* beta, float* C, const int* ldc);
void dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
            const double* alpha, const double* A, const int* lda, const double* B, const int* ldb,
            const double* beta, double* C, const int* ldc);
void openblas_set_num_threads(int n);
char* openblas_get_config(void);
}
#endif

namespace gdn::bench {

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

GemmRate fastest(const std::function<void()>& fn, int n, int reps) {
  fn();  // untimed: first touch of C, the library's thread pool, the clock's ramp
  double wall = 0, cpu = 0;
  for (int r = 0; r < reps; ++r) {
    const double c0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double c = process_cpu_seconds() - c0;
    if (r == 0 || s < wall) wall = s;
    if (r == 0 || c < cpu) cpu = c;
  }
  const double flop = 2.0 * double(n) * n * n;
  return {flop / wall * 1e-9, wall * 1e3, flop / (cpu / omp_get_max_threads()) * 1e-9};
}

}  // namespace

template <typename T>
GemmCeiling measure_gemm_ceiling(int n, int reps) {
  const std::size_t nn = std::size_t(n) * n;
  std::vector<T> A(nn), B(nn), C(nn);
  Rng rng(7);
  for (T& x : A) x = T(rng.uniform(-1, 1));
  for (T& x : B) x = T(rng.uniform(-1, 1));
  GemmCeiling out;
  out.n = n;
  // y[N, out] = x[N, in] W^T with N = in = out = n: C = A B^T.
  out.ours = fastest(
      [&] { ops::linear_forward(Host{}, Precision::plain, A.data(), B.data(), n, n, n, C.data()); },
      n, reps);
#if GDN_HAVE_BLAS
  std::vector<T> D(nn);
  out.blas_threads = omp_get_max_threads();
  openblas_set_num_threads(out.blas_threads);
  out.blas_name = openblas_get_config();
  // Column-major, C^T = B A^T: B is B^T column-major (transposed back), A is A^T.
  const T one = 1, zero = 0;
  out.blas = fastest(
      [&] {
        if constexpr (std::is_same_v<T, float>)
          sgemm_("T", "N", &n, &n, &n, &one, B.data(), &n, A.data(), &n, &zero, D.data(), &n);
        else
          dgemm_("T", "N", &n, &n, &n, &one, B.data(), &n, A.data(), &n, &zero, D.data(), &n);
      },
      n, reps);
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < nn; ++i) {
    diff = std::max(diff, double(std::abs(C[i] - D[i])));
    scale = std::max(scale, double(std::abs(D[i])));
  }
  out.blas_rel_diff = scale > 0 ? diff / scale : diff;
#endif
  return out;
}

template GemmCeiling measure_gemm_ceiling<float>(int, int);
template GemmCeiling measure_gemm_ceiling<double>(int, int);

}  // namespace gdn::bench
