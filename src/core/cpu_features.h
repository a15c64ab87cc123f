// What this CPU can run and what this build was compiled for, read from the CPU itself
// (cpuid, and xgetbv for the registers the OS saves), so that every CPU figure can say
// which machine it came from (the benchmarks print describe() beside their numbers) and
// so that kernels can be chosen at run time (issue 36). Machines differ between
// sessions and between nodes of a cluster: AVX2-only, Zen 4 with AVX512_BF16, Sapphire
// Rapids with AMX. A feature counts only where the OS enables its registers too.
#pragma once

#include <string>

namespace gdn {

struct CpuFeatures {
  std::string model;  // the brand string, e.g. "AMD EPYC 9654 96-Core Processor"
  bool fma = false, avx2 = false, avx512f = false, avx512_bf16 = false, amx_bf16 = false;
  // "AMD EPYC ...: AVX2 FMA AVX-512F AVX512_BF16, no AMX"
  std::string describe() const;
};

// This CPU's, read once.
const CpuFeatures& cpu_features();

// The widest vector ISA the host code of this build was compiled for ("AVX-512F",
// "AVX2+FMA", "AVX", "baseline"), and whether the build used -march=native.
std::string compiled_isa();
bool compiled_native();

}  // namespace gdn
