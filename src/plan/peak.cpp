#include "plan/peak.h"

namespace gdn::plan {

namespace {

struct GpuPeak {
  const char* key;        // a part of the name; the first entry whose key the name holds wins
  double bf16, f32, f64;  // TFLOP/s
};

// NVIDIA's datasheet figures, dense. The H100 PCIe and NVL come before the plain "H100"
// (SXM5: "NVIDIA H100 80GB HBM3"), whose figures the H200 and GH200 share.
constexpr GpuPeak kGpus[] = {
    {"H100 PCIe", 756.5, 51.2, 51.2}, {"H100 NVL", 835.5, 60.0, 60.0}, {"H100", 989.4, 66.9, 66.9},
    {"H200", 989.4, 66.9, 66.9},      {"GH200", 989.4, 66.9, 66.9},    {"A100", 312.0, 19.5, 19.5},
};

}  // namespace

double gpu_peak_flops(const std::string& name, DType dtype) {
  for (const GpuPeak& g : kGpus)
    if (name.find(g.key) != std::string::npos)
      return 1e12 * (dtype == DType::bf16 ? g.bf16 : dtype == DType::f64 ? g.f64 : g.f32);
  return 0;
}

}  // namespace gdn::plan
