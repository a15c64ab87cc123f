// The attention op's speed (a benchmark, not a test): causal grouped-query
// attention forward and forward + backward at one shape, in the bf16 mode (on CUDA each
// backend in one run: cuDNN's fused attention, attn_bf16_cudnn, where built, and our flash
// kernels on bf16 tensor cores, attn_bf16_flash, also on q, k, v stored in bf16,
// attn_bf16_io, as SDPA reads them) or in float (the exact kernels), and on CUDA
// the measured bf16 tensor-core peak: a cuBLAS bf16 x bf16 -> fp32 GEMM of --peak-n cubed, the
// denominator of the model-FLOP fractions the device check reports. scripts/bench_sdpa.py times
// torch's scaled_dot_product_attention (flash backend) at the same shape, with the same FLOP count,
// for the ratio.
//
// Prints the benchmark table (common/bench_table.h), or with --json JSON lines. The
// table's check column compares what each variant's last run wrote with exact attention
// in fp64 on the same (unrounded) inputs, on a sample that costs O(T D) per row: the
// outputs and dq of a few query rows (the first, some in between, the last 8) and dk, dv of
// the last 8 keys, which only those last queries see; the GEMM peak's output with its
// closed form (constant inputs). A wrong row makes the exit code 1.
//
//   gdn_attn_bench --device cuda --batch 1 --seq 32768 --heads 16 --kv-heads 2 --dim 256
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cxxopts.hpp>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/app_common.h"
#include "common/bench_table.h"
#include "common/deprecated_env.h"
#include "core/error.h"
#include "core/precision.h"
#include "core/rng.h"
#include "ops/attention/attention.h"
#include "ops/attention/cudnn_attention.h"

#if GDN_HAVE_CUDA
#include "core/bf16.h"
#include "ops/attention/flash_attention.h"
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

// The table's rows (null: JSON lines, --json).
app::BenchTable* g_table = nullptr;

void print(const Shape& s, const std::string& device, const std::string& variant, double ms,
           double flops, const app::BenchCheck& check = app::unchecked()) {
  const double tflops = flops > 0 ? flops / (ms * 1e-3) * 1e-12 : NAN;
  if (g_table) {
    g_table->row(
        {std::to_string(s.B), std::to_string(s.T), std::to_string(s.Hq), std::to_string(s.Hkv),
         std::to_string(s.D), variant, device, app::fixed(ms, 3), app::fixed(tflops, 3)},
        check);
    return;
  }
  json line = {{"shape", {{"B", s.B}, {"T", s.T}, {"Hq", s.Hq}, {"Hkv", s.Hkv}, {"D", s.D}}},
               {"variant", variant},
               {"device", device},
               {"median_ms", ms}};
  if (flops > 0) line["tflops"] = flops / (ms * 1e-3) * 1e-12;
  std::cout << line.dump() << std::endl;
}

// The check's sample: exact attention in fp64 of query rows `rows` (ascending, the last
// `tail` of them the sequence's last rows), and, from those, dk and dv of the last `tail`
// keys. Host copies of the inputs and of what the op wrote; o and dq as the op lays them
// out ([B, T, Hq, D]), dk and dv too ([B, T, Hkv, D]); `grads` false: o only.
struct AttentionSample {
  std::vector<std::int64_t> rows;
  std::int64_t tail = 0;
};

AttentionSample attention_sample(std::int64_t T) {
  AttentionSample a;
  a.tail = std::min<std::int64_t>(T, 8);
  for (std::int64_t t : {std::int64_t(0), T / 4, T / 2})
    if (t < T - a.tail) a.rows.push_back(t);
  for (std::int64_t t = T - a.tail; t < T; ++t) a.rows.push_back(t);
  a.rows.erase(std::unique(a.rows.begin(), a.rows.end()), a.rows.end());
  return a;
}

double attention_error(const Shape& s, const AttentionSample& a, const std::vector<float>& q,
                       const std::vector<float>& k, const std::vector<float>& v,
                       const std::vector<float>& dout, const std::vector<float>& o,
                       const std::vector<float>& dq, const std::vector<float>& dk,
                       const std::vector<float>& dv, bool grads) {
  const double scale = 1 / std::sqrt(double(s.D));
  const int D = s.D, group = s.Hq / s.Hkv;
  auto qi = [&](int b, std::int64_t t, int h) {
    return ((std::size_t(b) * s.T + t) * s.Hq + h) * D;
  };
  auto ki = [&](int b, std::int64_t t, int h) {
    return ((std::size_t(b) * s.T + t) * s.Hkv + h) * D;
  };
  std::vector<double> got_o, want_o, got_dq, want_dq;
  const std::int64_t first_key = s.T - a.tail;
  // dk, dv of the last keys: [B, tail, Hkv, D]
  std::vector<double> want_dk(std::size_t(s.B) * a.tail * s.Hkv * D), want_dv(want_dk.size()),
      got_dk, got_dv;
  for (int b = 0; b < s.B; ++b)
    for (std::int64_t i : a.rows)
      for (int h = 0; h < s.Hq; ++h) {
        const int g = h / group;
        const float* qr = q.data() + qi(b, i, h);
        const float* dor = dout.data() + qi(b, i, h);
        std::vector<double> p(std::size_t(i) + 1), dp(p.size());
        double m = -INFINITY;
        for (std::int64_t j = 0; j <= i; ++j) {
          double x = 0;
          for (int d = 0; d < D; ++d) x += double(qr[d]) * double(k[ki(b, j, g) + d]);
          p[std::size_t(j)] = scale * x;
          m = std::max(m, scale * x);
        }
        double z = 0;
        for (double& x : p) z += (x = std::exp(x - m));
        std::vector<double> out(std::size_t(D), 0.0), dqr(std::size_t(D), 0.0);
        double delta = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          double& pj = p[std::size_t(j)];
          pj /= z;
          double x = 0;
          for (int d = 0; d < D; ++d) {
            out[std::size_t(d)] += pj * double(v[ki(b, j, g) + d]);
            x += double(dor[d]) * double(v[ki(b, j, g) + d]);
          }
          dp[std::size_t(j)] = x;
          delta += pj * x;
        }
        for (int d = 0; d < D; ++d) {
          got_o.push_back(o[qi(b, i, h) + d]);
          want_o.push_back(out[std::size_t(d)]);
        }
        if (!grads) continue;
        for (std::int64_t j = 0; j <= i; ++j) {
          const double ds = p[std::size_t(j)] * (dp[std::size_t(j)] - delta);
          for (int d = 0; d < D; ++d)
            dqr[std::size_t(d)] += scale * ds * double(k[ki(b, j, g) + d]);
          if (j < first_key) continue;
          const std::size_t at = ((std::size_t(b) * a.tail + (j - first_key)) * s.Hkv + g) * D;
          for (int d = 0; d < D; ++d) {
            want_dk[at + d] += scale * ds * double(qr[d]);
            want_dv[at + d] += p[std::size_t(j)] * double(dor[d]);
          }
        }
        for (int d = 0; d < D; ++d) {
          got_dq.push_back(dq[qi(b, i, h) + d]);
          want_dq.push_back(dqr[std::size_t(d)]);
        }
      }
  double e = app::rel_l2_error(got_o, want_o);
  if (!grads) return e;
  for (int b = 0; b < s.B; ++b)
    for (std::int64_t j = first_key; j < s.T; ++j)
      for (int g = 0; g < s.Hkv; ++g)
        for (int d = 0; d < D; ++d) {
          got_dk.push_back(dk[ki(b, j, g) + d]);
          got_dv.push_back(dv[ki(b, j, g) + d]);
        }
  return std::max({e, app::rel_l2_error(got_dq, want_dq), app::rel_l2_error(got_dk, want_dk),
                   app::rel_l2_error(got_dv, want_dv)});
}

template <typename Dev>
void bench_attention(const Shape& s, bool bf16, int warmup, int reps, const std::string& device) {
  const std::size_t nq = std::size_t(s.B) * s.T * s.Hq * s.D,
                    nk = std::size_t(s.B) * s.T * s.Hkv * s.D;
  Rng rng(1);
  std::vector<std::vector<float>> host;  // the inputs, for the table's check
  auto random = [&rng, &host](std::size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = float(rng.normal());
    host.push_back(x);
    return to_device<Dev>(x.data(), x.size());
  };
  const Buffer<Dev, float> q = random(nq), k = random(nk), v = random(nk), dout = random(nq);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(s.T));
  for (std::int64_t i = 0; i < s.T; ++i) pos[std::size_t(i)] = i;
  const Buffer<Dev, std::int64_t> qpos = to_device<Dev>(pos.data(), pos.size());
  Buffer<Dev, float> o(nq), lse(std::size_t(s.B) * s.T * s.Hq), dq(nq), dk(nk), dv(nk);
  const double scale = 1 / std::sqrt(double(s.D));
  const Precision mode = precision_of(bf16);
  const Dev dev{};
  auto forward = [&] {
    ops::attention_forward(dev, mode, q.data(), k.data(), v.data(), qpos.data(), s.B, s.T, s.T,
                           s.Hq, s.Hkv, s.D, scale, o.data(), lse.data());
  };
  auto backward = [&] {
    ops::attention_backward(dev, mode, q.data(), k.data(), v.data(), o.data(), lse.data(),
                            dout.data(), qpos.data(), s.B, s.T, s.T, s.Hq, s.Hkv, s.D, scale,
                            dq.data(), dk.data(), dv.data());
  };
  const double f = forward_flops(s);
  // bf16 inputs and products against fp64 on the unrounded inputs; float within 1e-4.
  const AttentionSample sample = attention_sample(s.T);
  auto check = [&](bool grads) {
    if (!g_table) return app::unchecked();
    return app::BenchCheck{
        attention_error(s, sample, host[0], host[1], host[2], host[3], to_host<Dev>(o),
                        to_host<Dev>(dq), to_host<Dev>(dk), to_host<Dev>(dv), grads),
        bf16 ? 3e-2 : 1e-4};
  };
  // On CUDA in the bf16 mode each backend the op can take, in one run: cuDNN's fused
  // attention (attn_bf16_cudnn, where built; a refusal is printed and the row skipped) and
  // our flash kernels (attn_bf16_flash); elsewhere the one kernel (attn_bf16, attn_f32).
  std::vector<std::pair<std::string, ops::AttentionBackend>> backends = {
      {bf16 ? "attn_bf16" : "attn_f32", ops::AttentionBackend::automatic}};
  if (std::is_same_v<Dev, Cuda> && bf16) {
    backends = {{"attn_bf16_flash", ops::AttentionBackend::flash}};
    if (ops::cudnn_attention_built())
      backends.insert(backends.begin(), {"attn_bf16_cudnn", ops::AttentionBackend::cudnn});
  }
  for (const auto& [tag, backend] : backends) {
    ops::set_attention_backend(backend);
    forward();
    Dev::synchronize();
    if (const std::vector<std::string> notes = ops::take_cudnn_attention_notes(); !notes.empty()) {
      for (const std::string& n : notes) std::cerr << tag << ": cuDNN refused " << n << "\n";
      continue;
    }
    const double fwd_ms = median_ms([&] { forward(), Dev::synchronize(); }, warmup, reps);
    print(s, device, tag + "_fwd", fwd_ms, f, check(false));
    const double fwd_bwd_ms =
        median_ms([&] { forward(), backward(), Dev::synchronize(); }, warmup, reps);
    print(s, device, tag + "_fwd_bwd", fwd_bwd_ms, 3.5 * f, check(true));
  }
  ops::set_attention_backend(ops::AttentionBackend::flash);  // attn_bf16_io below is flash's
#if GDN_HAVE_CUDA
  // q, k, v stored in bf16, as SDPA reads them (the flash kernels on bf16 global memory,
  // K and V by cp.async in two stages): attn_bf16_io.
  if constexpr (std::is_same_v<Dev, Cuda>) {
    if (!bf16 || !ops::flash_attention_chosen(s.D, mode) || s.D % 8 != 0) return;
    auto narrow = [](const std::vector<float>& x) {
      std::vector<Bf16> y(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) y[i] = to_bf16(x[i]);
      return to_device<Cuda>(y.data(), y.size());
    };
    const Buffer<Cuda, Bf16> q16 = narrow(host[0]), k16 = narrow(host[1]), v16 = narrow(host[2]);
    auto forward16 = [&] {
      ops::flash_attention_forward(Cuda{}, q16.data(), k16.data(), v16.data(), qpos.data(), s.B,
                                   s.T, s.T, s.Hq, s.Hkv, s.D, scale, o.data(), lse.data(),
                                   nullptr);
    };
    auto backward16 = [&] {
      ops::flash_attention_backward(Cuda{}, q16.data(), k16.data(), v16.data(), o.data(),
                                    lse.data(), dout.data(), qpos.data(), s.B, s.T, s.T, s.Hq,
                                    s.Hkv, s.D, scale, dq.data(), dk.data(), dv.data(), nullptr);
    };
    print(s, device, "attn_bf16_io_fwd",
          median_ms([&] { forward16(), Dev::synchronize(); }, warmup, reps), f, check(false));
    print(s, device, "attn_bf16_io_fwd_bwd",
          median_ms([&] { forward16(), backward16(), Dev::synchronize(); }, warmup, reps), 3.5 * f,
          check(true));
  }
#endif
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
  if (g_table) {
    // Every output is n x^2 for the constant input x (bf16 0x3c3c), rounded to bf16.
    const float x = to_float(Bf16{0x3c3c});
    const double want = double(n) * double(x) * double(x);
    double err2 = 0;
    for (const Bf16 e : to_host<Cuda>(c)) err2 += (to_float(e) - want) * (to_float(e) - want);
    g_table->row({"-", "-", "-", "-", "-", "bf16_gemm_" + std::to_string(n), "cuda",
                  app::fixed(ms, 3), app::fixed(2.0 * n * double(n) * n / (ms * 1e-3) * 1e-12, 3)},
                 {std::sqrt(err2 / double(nn)) / want, 1e-2});
    return;
  }
  json line = {{"variant", "bf16_gemm_peak"},
               {"device", "cuda"},
               {"n", n},
               {"median_ms", ms},
               {"tflops", 2.0 * n * double(n) * n / (ms * 1e-3) * 1e-12}};
  std::cout << line.dump() << std::endl;
}
#endif

int run(int argc, char** argv) {
  app::apply_deprecated_env();  // the kernel choices of the old variables, warned
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
      "json", "JSON lines instead of the table (no check against the fp64 reference)")(
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
  std::optional<app::BenchTable> table;
  if (!r.count("json")) {
    table.emplace(std::vector<app::BenchColumn>{{"B", "", 3},
                                                {"T", "", 7},
                                                {"Hq", "", 4},
                                                {"Hkv", "", 4},
                                                {"D", "", 4},
                                                {"variant", "", 16},
                                                {"device", "", 6},
                                                {"time", "(ms)", 10},
                                                {"rate", "(TFLOP/s)", 9}});
    table->header();
    g_table = &*table;
  }
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
  if (!table) return 0;
  return table->exit_status(
      {"check: rel L2 against exact attention in fp64 on the same inputs, of o "
       "(fwd; with dq, and dk, dv of the last keys: fwd_bwd) at sampled query "
       "rows; tolerance 1e-4 (float), 3e-2 (bf16); the GEMM peak against its "
       "closed form, 1e-2",
       "rate: causal FLOPs, 4 B Hq D T (T + 1) / 2 forward, 3.5 times that "
       "forward + backward"});
}

}  // namespace

int main(int argc, char** argv) {
  return gdn::app::serial_main("gdn_attn_bench", run, argc, argv);
}
