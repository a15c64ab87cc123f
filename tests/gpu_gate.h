// Whether a GPU test may run here. Two switches, so that "skipped" is never read as
// "passed" where a GPU is expected:
//   GDN_TEST_GPU_ONLY=1   (ctest's [gpu] entries, tests/CMakeLists): the test needs a GPU;
//                         without one it is skipped (exit 77, ctest's SKIP).
//   GDN_TEST_NEEDS_GPU=1  (scripts/device_check.sh, on the GPU machine): a GPU must be
//                         there; without one every GPU test fails (exit 1).
// The serial GPU binaries (gpu/gpu_main.cpp) always need a GPU; the MPI ones only in their
// [gpu] entries.
#pragma once

#include <cstdlib>
#include <string>
#if GDN_HAVE_CUDA
#include "runtime/device_select.h"
#endif

namespace gdn::test {

// 0: run; 77: skip; 1: fail. `message` says why when not 0. needs_gpu: this binary needs
// one whatever the environment says.
inline int gpu_gate(bool needs_gpu, std::string& message) {
  const bool required = std::getenv("GDN_TEST_NEEDS_GPU") != nullptr;
  if (!needs_gpu && !required && !std::getenv("GDN_TEST_GPU_ONLY")) return 0;
  std::string why;
#if GDN_HAVE_CUDA
  if (visible_gpu_count(&why) > 0) return 0;
#else
  why = "this build has no CUDA path";
#endif
  if (required) {
    message = "FAIL: GDN_TEST_NEEDS_GPU is set but no GPU is visible (" + why + ")";
    return 1;
  }
  message = "SKIP: no GPU visible (" + why + ")";
  return 77;
}

}  // namespace gdn::test
