// The attention op's speed, JSON lines (a benchmark, not a test): causal grouped-query
// attention forward and forward + backward at one shape, in the bf16 mode (on CUDA the
// flash kernels on bf16 tensor cores, ops/attention/flash_attention.h) or in float (the
// exact kernels), and on CUDA the measured bf16 tensor-core peak: a cuBLAS bf16 x bf16 ->
// fp32 GEMM of --peak-n cubed, the denominator of the model-FLOP fractions the device
// check reports. scripts/bench_sdpa.py times torch's scaled_dot_product_attention (flash
// backend) at the same shape, with the same FLOP count, for the ratio.
//
//   gdn_attn_bench --device cuda --batch 1 --seq 32768 --heads 16 --kv-heads 2 --dim 256
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cxxopts.hpp>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/app_common.h"
#include "core/autocast.h"
#include "core/error.h"
#include "core/rng.h"
#include "ops/attention/attention.h"

#if GDN_HAVE_CUDA
#include "core/bf16.h"
#include "runtime/cublas.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"
#include "runtime/device_select.h"
#endif

using namespace gdn;
using json = nlohmann::ordered_json;

namespace {

struct Shape {
  int B, Hq, Hkv, D;
  std::int64_t T;
};

// Median wall milliseconds of reps calls after warmup calls; fn synchronizes the device.
double median_ms(const std::function<void()>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return app::median(ms);
}

// Causal forward FLOPs: q k^T and P v over the T (T + 1) / 2 visible pairs per head, as
// torch's and fla's benchmarks count them; the backward is 2.5 times that (five GEMMs to
// two), so forward + backward is 3.5 times.
double forward_flops(const Shape& s) {
  return 4.0 * s.B * s.Hq * s.D * (double(s.T) * double(s.T + 1) / 2);
}

void print(const Shape& s, const std::string& device, const std::string& variant, double ms,
           double flops) {
  json line = {{"shape", {{"B", s.B}, {"T", s.T}, {"Hq", s.Hq}, {"Hkv", s.Hkv}, {"D", s.D}}},
               {"variant", variant},
               {"device", device},
               {"median_ms", ms}};
  if (flops > 0) line["tflops"] = flops / (ms * 1e-3) * 1e-12;
  std::cout << line.dump() << std::endl;
}

template <typename Dev>
void bench_attention(const Shape& s, bool bf16, int warmup, int reps, const std::string& device) {
  const std::size_t nq = std::size_t(s.B) * s.T * s.Hq * s.D,
                    nk = std::size_t(s.B) * s.T * s.Hkv * s.D;
  Rng rng(1);
  auto random = [&rng](std::size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = float(rng.normal());
    return to_device<Dev>(x.data(), x.size());
  };
  const Buffer<Dev, float> q = random(nq), k = random(nk), v = random(nk), dout = random(nq);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(s.T));
  for (std::int64_t i = 0; i < s.T; ++i) pos[std::size_t(i)] = i;
  const Buffer<Dev, std::int64_t> qpos = to_device<Dev>(pos.data(), pos.size());
  Buffer<Dev, float> o(nq), lse(std::size_t(s.B) * s.T * s.Hq), dq(nq), dk(nk), dv(nk);
  const double scale = 1 / std::sqrt(double(s.D));
  const Bf16Autocast mode(bf16);
  const Dev dev{};
  auto forward = [&] {
    ops::attention_forward(dev, q.data(), k.data(), v.data(), qpos.data(), s.B, s.T, s.T, s.Hq,
                           s.Hkv, s.D, scale, o.data(), lse.data());
  };
  auto backward = [&] {
    ops::attention_backward(dev, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(),
                            qpos.data(), s.B, s.T, s.T, s.Hq, s.Hkv, s.D, scale, dq.data(),
                            dk.data(), dv.data());
  };
  const std::string tag = bf16 ? "attn_bf16" : "attn_f32";
  const double f = forward_flops(s);
  print(s, device, tag + "_fwd", median_ms([&] { forward(), Dev::synchronize(); }, warmup, reps),
        f);
  print(s, device, tag + "_fwd_bwd",
        median_ms([&] { forward(), backward(), Dev::synchronize(); }, warmup, reps), 3.5 * f);
}

#if GDN_HAVE_CUDA
// cuBLAS bf16 x bf16 -> fp32 accumulation, bf16 out, n x n x n: the tensor cores' rate as
// this machine delivers it.
void bench_peak(int n, int warmup, int reps) {
  const std::size_t nn = std::size_t(n) * n;
  DeviceBuffer<Bf16> a(nn), b(nn), c(nn);
  GDN_CUDA_CHECK(cudaMemset(a.data(), 0x3c, nn * sizeof(Bf16)));  // ~0.01: finite sums
  GDN_CUDA_CHECK(cudaMemset(b.data(), 0x3c, nn * sizeof(Bf16)));
  const float one = 1, zero = 0;
  cublasHandle_t h = cublas_handle();
  auto gemm = [&] {
    GDN_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_16BF,
                                  n, b.data(), CUDA_R_16BF, n, &zero, c.data(), CUDA_R_16BF, n,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    Cuda::synchronize();
  };
  const double ms = median_ms(gemm, warmup, reps);
  json line = {{"variant", "bf16_gemm_peak"},
               {"device", "cuda"},
               {"n", n},
               {"median_ms", ms},
               {"tflops", 2.0 * n * double(n) * n / (ms * 1e-3) * 1e-12}};
  std::cout << line.dump() << std::endl;
}
#endif

int run(int argc, char** argv) {
  cxxopts::Options options("gdn_attn_bench",
                           "Times the causal grouped-query attention op (forward, forward + "
                           "backward) and, on CUDA, the bf16 tensor-core GEMM peak. JSON lines.");
  options.add_options()("device", "cpu or cuda",
                        cxxopts::value<std::string>()->default_value("cuda"))(
      "batch", "batch rows B", cxxopts::value<int>()->default_value("1"))(
      "seq", "tokens T (queries and keys, causal)",
      cxxopts::value<std::int64_t>()->default_value("32768"))(
      "heads", "query heads Hq", cxxopts::value<int>()->default_value("16"))(
      "kv-heads", "key/value heads Hkv (divides Hq)", cxxopts::value<int>()->default_value("2"))(
      "dim", "head dimension D", cxxopts::value<int>()->default_value("256"))(
      "mode", "bf16 (the bf16 mode: flash kernels on CUDA), float, or both",
      cxxopts::value<std::string>()->default_value("bf16"))(
      "peak-n", "n of the n^3 bf16 GEMM peak on CUDA (0: skip)",
      cxxopts::value<int>()->default_value("8192"))("warmup", "untimed runs first",
                                                    cxxopts::value<int>()->default_value("1"))(
      "reps", "timed runs (the median is reported)", cxxopts::value<int>()->default_value("5"))(
      "h,help", "print this help");
  const auto parsed = app::parse_command_line(options, argc, argv);
  if (!parsed) {
    std::cout << options.help() << std::endl;
    return 0;
  }
  const auto& r = *parsed;
  const Shape s{r["batch"].as<int>(), r["heads"].as<int>(), r["kv-heads"].as<int>(),
                r["dim"].as<int>(), r["seq"].as<std::int64_t>()};
  GDN_CHECK(s.B > 0 && s.T > 0 && s.D > 0, "--batch, --seq and --dim must be positive, got ", s.B,
            ", ", s.T, ", ", s.D);
  GDN_CHECK(s.Hkv > 0 && s.Hq % s.Hkv == 0, "--heads ", s.Hq, " is not a multiple of --kv-heads ",
            s.Hkv);
  const std::string device = r["device"].as<std::string>(), mode = r["mode"].as<std::string>();
  GDN_CHECK(device == "cpu" || device == "cuda", "--device ", device,
            " is not known: expected cpu or cuda");
  GDN_CHECK(mode == "bf16" || mode == "float" || mode == "both", "--mode ", mode,
            " is not known: expected bf16, float or both");
  const int warmup = r["warmup"].as<int>(), reps = r["reps"].as<int>();
  GDN_CHECK(warmup >= 0 && reps > 0, "--warmup must be >= 0 and --reps > 0, got ", warmup, ", ",
            reps);
  for (const bool bf16 : {true, false}) {
    if ((bf16 && mode == "float") || (!bf16 && mode == "bf16")) continue;
    if (device == "cpu") {
      bench_attention<Host>(s, bf16, warmup, reps, device);
      continue;
    }
#if GDN_HAVE_CUDA
    std::string why;
    GDN_CHECK(visible_gpu_count(&why) > 0, "--device cuda: no GPU is visible (", why, ")");
    bench_attention<Cuda>(s, bf16, warmup, reps, device);
#else
    GDN_CHECK(false, "--device cuda: this build has no CUDA path (GDN_HAVE_CUDA is off)");
#endif
  }
#if GDN_HAVE_CUDA
  if (device == "cuda" && r["peak-n"].as<int>() > 0) bench_peak(r["peak-n"].as<int>(), 2, reps);
#endif
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gdn::app::serial_main("gdn_attn_bench", run, argc, argv);
}
