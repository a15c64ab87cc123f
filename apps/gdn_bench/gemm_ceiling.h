// The practical ceiling beside the FMA peak (docs/design.md §2d): the best rate of a large
// square GEMM, C[n, n] = A[n, n] B[n, n]^T, on the same threads in the same run, ours
// (ops::linear_forward: the host GEMM of the model's linear layers, packed panels of B
// over OpenMP row blocks with la::gemm's register tiles) and a library's (OpenBLAS's
// sgemm / dgemm, where the build found it: GDN_HAVE_BLAS, a bench-only dependency).
#pragma once

#include <string>

namespace gdn::bench {

struct GemmRate {
  double gflops = 0;  // 2 n^3 over the fastest timed run
  double ms = 0;      // that run's wall time
  // 2 n^3 over the least process CPU time per thread: the rate had the threads held their
  // cores (a waiting thread that spins counts, so it errs low). On a shared machine it
  // stays near the quiet rate when the wall rate does not.
  double gflops_cpu = 0;
};

struct GemmCeiling {
  int n = 0;
  GemmRate ours, blas;       // blas: zero when there is none
  std::string blas_name;     // the library's own description ("" without one)
  int blas_threads = 0;      // the threads it was told to use (omp_get_max_threads())
  double blas_rel_diff = 0;  // max |ours - blas| / max |blas|: both computed the same C
  double best() const { return ours.gflops > blas.gflops ? ours.gflops : blas.gflops; }
};

// Times each GEMM `reps` times after one untimed run and keeps the fastest (a neighbour's
// burst only slows a run down). Defined for float and double.
template <typename T>
GemmCeiling measure_gemm_ceiling(int n, int reps);

}  // namespace gdn::bench
