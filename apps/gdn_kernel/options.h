// gdn_kernel's command line: the flags, their checks, and --help.
#pragma once

#include <cxxopts.hpp>
#include <optional>
#include <string>

#include "common/device_flag.h"
#include "core/dtype.h"
#include "gdn/problem.h"

namespace gdn::kernel_app {

struct Args {
  std::string in, out;
  bool backward = false, l2norm_qk = false, log_depth_scan = false;
  int chunk_size = kDefaultChunkSize;
  double scale = 0;
  std::optional<DType> dtype;  // none: the inputs' dtype
  app::Device device = app::Device::cpu;
  double watchdog_s = 600;
  bool help = false;
};

cxxopts::Options make_options();
// Throws gdn::Error naming the flag and the value for bad input.
Args parse_args(int argc, char** argv);

}  // namespace gdn::kernel_app
