// main() of the serial GPU test binaries: exit code 77 (ctest's SKIP, see tests/CMakeLists)
// where no GPU is visible, so a machine without one reports these tests skipped, never
// passed. Otherwise the usual Catch2 session.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <iostream>
#include <string>

#include "runtime/device_select.h"

int main(int argc, char** argv) {
  std::string why;
  if (gdn::visible_gpu_count(&why) == 0) {
    std::cout << "SKIP: no GPU visible (" << why << ")" << std::endl;
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
