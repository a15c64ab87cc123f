// Catch2 main for tests run under mpirun: every rank runs every test case; a failure on
// any rank makes that rank exit non-zero, which mpirun reports for the whole job. With
// GDN_TEST_NEEDS_GPU set (the [gpu] entries of tests/CMakeLists), every rank exits with 77,
// ctest's SKIP, where no GPU is visible: such a test is skipped, never passed.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <string>
#if GDN_HAVE_CUDA
#include "runtime/device_select.h"
#endif

namespace {
// 0 when the test may run here, else why not.
bool gpu_missing(std::string& why) {
  if (!std::getenv("GDN_TEST_NEEDS_GPU")) return false;
#if GDN_HAVE_CUDA
  return gdn::visible_gpu_count(&why) == 0;
#else
  why = "this build has no CUDA path";
  return true;
#endif
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string why;
  int missing = gpu_missing(why) ? 1 : 0, any_missing = 0;
  MPI_Allreduce(&missing, &any_missing, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_missing) {
    if (rank == 0) std::cout << "SKIP: no GPU visible (" << why << ")" << std::endl;
    MPI_Finalize();
    return 77;
  }
  Catch::Session session;
  int rc = session.applyCommandLine(argc, argv);
  if (rc == 0) rc = session.run();
  // Agree on the outcome so no rank finalizes while another still waits in a collective.
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst == 0 ? 0 : 1;
}
