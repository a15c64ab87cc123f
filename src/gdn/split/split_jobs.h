// The parallel loop of the intra-rank split (split_pass.h): n independent jobs over the
// OpenMP threads, each job on one thread from start to end. Inside a job every parallel
// region runs on that one thread: each thread sets its own nthreads-var to 1 first, so
// the (batch, head) loops of the LocalPass a job calls stay serial even where nested
// parallelism is enabled (OMP_MAX_ACTIVE_LEVELS > 1), instead of oversubscribing the
// cores. The ICV belongs to the region's implicit tasks: the caller's is unchanged after.
// A job's exception is rethrown here, after the loop (it must not leave the region).
#pragma once

#include <omp.h>

#include <exception>

namespace gdn {

template <typename F>
void for_each_job(int n, F&& job) {
  std::exception_ptr error;
#pragma omp parallel
  {
    omp_set_num_threads(1);
#pragma omp for schedule(dynamic, 1)
    for (int j = 0; j < n; ++j) {
      try {
        job(j);
      } catch (...) {
#pragma omp critical(gdn_for_each_job)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace gdn
