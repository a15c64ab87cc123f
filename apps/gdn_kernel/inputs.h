// gdn_kernel's inputs: the .npy files of --in, read and checked on every rank before any
// collective (shapes that agree, dtypes, finite values, the documented ranges, packed
// sequence boundaries), and the GdnProblem they describe.
#pragma once

#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/npy.h"
#include "gdn/problem.h"
#include "gdn_kernel/options.h"

namespace gdn::kernel_app {

struct Inputs {
  NpyArray q, k, v, g, beta;
  std::optional<NpyArray> h0, dO, dht;
  GdnProblem problem;
  DType compute = DType::f64;
};

std::string input_path(const Args& a, const std::string& name);

// Throws gdn::Error naming the file, the value (with its index) and what was expected.
Inputs load_inputs(const Args& a);

}  // namespace gdn::kernel_app
