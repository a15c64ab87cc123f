#include "common/flop_rate.h"

#include <fmt/format.h>

#include "core/cpu_features.h"
#include "ops/gemm/fma_peak.h"
#include "plan/flops.h"
#include "plan/peak.h"
#include "plan/plan_input.h"

#if GDN_HAVE_CUDA
#include "runtime/device_select.h"
#endif

namespace gdn::app {

FlopRateChoice model_flop_rate(const RunConfig& cfg, Device device, double peak_tflops) {
  FlopRateChoice c;
  const plan::FlopReport f = plan::count_flops(plan::plan_input(cfg));
  c.rate.flops_per_step = f.step_cp1.total();
  c.rate.ranks = cfg.train.dp * cfg.train.cp;
  const DType dtype = cfg.train.dtype;
  if (peak_tflops > 0) {
    c.rate.peak = peak_tflops * 1e12;
    c.peak_source = "--peak-tflops";
  } else if (device == Device::cuda) {
#if GDN_HAVE_CUDA
    const std::string name = current_gpu_name();
    c.rate.peak = plan::gpu_peak_flops(name, dtype);
    c.peak_source = c.rate.peak > 0
                        ? fmt::format("{}'s {} datasheet peak (dense)", name, dtype_name(dtype))
                        : fmt::format(
                              "none known for the GPU '{}': pass --peak-tflops "
                              "for MFU",
                              name);
#endif
  } else {
    const bool f64 = dtype == DType::f64;
    const la::FmaPeak p =
        f64 ? la::measure_fma_peak<double>(0.2) : la::measure_fma_peak<float>(0.2);
    const bool dot = dtype == DType::bf16 && cpu_features().avx512_bf16;
    c.rate.peak = p.gflops * 1e9 * (dot ? 2 : 1);
    c.peak_source =
        fmt::format("this CPU's {} FMA peak{}, measured on {} threads", f64 ? "fp64" : "fp32",
                    dot ? " x 2 (bf16 dot products, AVX512_BF16)" : "", p.threads);
  }
  if (c.rate.peak > 0) c.predicted_ms = f.max_rank_executed() / c.rate.peak * 1e3;
  return c;
}

}  // namespace gdn::app
