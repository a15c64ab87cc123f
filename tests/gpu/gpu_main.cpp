// main() of the serial GPU test binaries: where no GPU is visible, exit code 77 (ctest's
// SKIP, see tests/CMakeLists), so a machine without one reports these tests skipped, never
// passed; with GDN_TEST_NEEDS_GPU set, exit code 1 instead (tests/gpu_gate.h). Otherwise
// the usual Catch2 session.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <iostream>
#include <string>

#include "gpu_gate.h"

int main(int argc, char** argv) {
  std::string message;
  if (const int rc = gdn::test::gpu_gate(true, message)) {
    std::cout << message << std::endl;
    return rc;
  }
  return Catch::Session().run(argc, argv);
}
