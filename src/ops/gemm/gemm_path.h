// Which GEMM kernels the host runs (gemm_kernels.h), chosen at run time from the CPU's own
// report (core/cpu_features.h): the widest ISA it has, unless the run's layout
// (train.gemm_path, train/run_layout.h), a test or a benchmark sets another one it has. The f32,
// f64 and bf16 GEMMs follow the same choice. The float and double results are the same bits on
// every path (one FMA chain per element, gemm.h); the bf16 ones too, but for results below 2^-126,
// which vdpbf16ps flushes to zero and the widening paths do not.
#pragma once

#include <string>
#include <vector>

#include "ops/gemm/gemm_kernels.h"

namespace gdn::la {

enum class GemmPath { kGeneric, kAvx2, kAvx512, kAvx512Bf16 };

// "generic", "avx2", "avx512", "avx512_bf16".
const char* gemm_path_name(GemmPath p);

// The paths of this build that this CPU can run, narrowest first.
std::vector<GemmPath> gemm_paths();

// The path named `name` ("avx2"); an unknown name, or one this CPU or build cannot run,
// throws an Error that starts with `what` and lists the choices.
GemmPath gemm_path_named(const std::string& name, const std::string& what);

// The path in use: the last of gemm_paths() until set_gemm_path.
GemmPath gemm_path();

// Switches the path (tests and benchmarks; not while GEMMs run on other threads). Throws an
// Error for a path this CPU or build cannot run.
void set_gemm_path(GemmPath p);

// The kernels of the path in use.
const GemmKernels& gemm_kernels();

}  // namespace gdn::la
