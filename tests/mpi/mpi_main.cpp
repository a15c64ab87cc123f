// Catch2 main for tests run under mpirun: every rank runs every test case; a failure on
// any rank makes that rank exit non-zero, which mpirun reports for the whole job. With
// GDN_TEST_GPU_ONLY set (the [gpu] entries of tests/CMakeLists), every rank exits with 77,
// ctest's SKIP, where no GPU is visible: such a test is skipped, never passed; with
// GDN_TEST_NEEDS_GPU set (the device check), with 1 (tests/gpu_gate.h).
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <string>

#include "gpu_gate.h"


int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Every rank takes the same way: the worst gate (fail 1 over skip 77 over run 0).
  std::string message;
  const int gate = gdn::test::gpu_gate(false, message);
  int mine = gate == 1 ? 2 : gate == 77 ? 1 : 0, worst_gate = 0;
  MPI_Allreduce(&mine, &worst_gate, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worst_gate > 0) {
    if (rank == 0 && !message.empty()) std::cout << message << std::endl;
    MPI_Finalize();
    return worst_gate == 2 ? 1 : 77;
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
