// gdn_gemm_bench: the linear layers' GEMM rates (ops::linear_forward / linear_backward, the
// host GEMM every projection and expert runs) per shape, dtype and GEMM path, as JSON
// lines, one per (shape, dtype, path, pass):
//   {"side": "ours", "cpu", "path", "dtype", "N", "in", "out", "pass", "ms", "gflops"}
// pass "forward" is y = x W^T (2 N in out FLOPs), "backward" dx = dy W and dW += dy^T x
// (twice that). Each is timed --reps times after one untimed run; the fastest counts. A
// benchmark, not a test: scripts/bench_gemm.sh runs it against torch's F.linear in the same
// run.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cxxopts.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/precision.h"
#include "core/rng.h"
#include "ops/gemm/gemm_path.h"
#include "ops/grouped_linear/grouped_linear.h"
#include "ops/linear/linear.h"

#if GDN_HAVE_CUDA
#include "runtime/cuda_device.h"
#include "runtime/device_select.h"
#endif

using namespace gdn;

namespace {

struct Shape {
  std::int64_t N;
  int in, out;
  int E = 0;  // --grouped: the experts the N rows are spread over
};

// "N,in,out;N,in,out", or with `experts` "R,in,out,E;..." (flag names the option).
std::vector<Shape> parse_shapes(const std::string& s, const char* flag, bool experts = false) {
  std::vector<Shape> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    Shape sh{};
    char c1 = 0, c2 = 0, c3 = ',';
    std::stringstream is(item);
    bool ok = bool(is >> sh.N >> c1 >> sh.in >> c2 >> sh.out);
    if (experts) ok = ok && bool(is >> c3 >> sh.E) && sh.E > 0;
    ok = ok && is.peek() == EOF && c1 == ',' && c2 == ',' && c3 == ',' && sh.N > 0 && sh.in > 0 &&
         sh.out > 0;
    GDN_CHECK(ok, flag, ": '", item, "' is not ", experts ? "R,in,out,E" : "N,in,out",
              " with positive integers");
    out.push_back(sh);
  }
  GDN_CHECK(!out.empty(), flag, ": no shape given");
  return out;
}

template <typename F>
double best_ms(int reps, F&& f) {
  f();
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// configs/gpu-step.json's linears at T = 8192: GDN's qkv and z projections, attention's
// query and o projections, GDN's out projection, and the LM head; its experts: 10 of 64
// per token, gate (or up) and down.
constexpr const char* kStepShapes = "8192,2048,8192;8192,2048,4096;8192,4096,2048;8192,2048,151936";
constexpr const char* kStepExperts = "81920,2048,512,64;81920,512,2048,64";

#if GDN_HAVE_CUDA
// Fastest wall milliseconds of reps synchronised calls after one untimed call.
template <typename F>
double best_cuda_ms(int reps, F&& f) {
  return best_ms(reps, [&] {
    f();
    Cuda::synchronize();
  });
}

void print_cuda(const std::string& variant, const Shape& s, const char* pass, double ms,
                double flops) {
  std::cout << nlohmann::json{{"variant", variant},
                              {"device", "cuda"},
                              {"gemm", {{"N", s.N}, {"in", s.in}, {"out", s.out}, {"E", s.E}}},
                              {"pass", pass},
                              {"median_ms", ms},
                              {"tflops", flops / ms * 1e-9}}
                   .dump()
            << std::endl;
}

template <typename T>
DeviceBuffer<T> random_device(std::size_t n, Rng& rng) {
  std::vector<T> h(n);
  for (T& e : h) e = T(rng.normal());
  return to_device<Cuda>(h.data(), n);
}

// The forward and backward of one (grouped or dense) linear, timed and printed.
template <typename Fwd, typename Bwd>
void time_passes(const std::string& variant, const Shape& s, int reps, Fwd&& fwd, Bwd&& bwd) {
  const double flops = 2.0 * double(s.N) * s.in * s.out;
  print_cuda(variant, s, "forward", best_cuda_ms(reps, fwd), flops);
  print_cuda(variant, s, "backward", best_cuda_ms(reps, bwd), 2 * flops);
}

int run_cuda(const std::vector<Shape>& shapes, const std::vector<Shape>& grouped, int reps) {
  std::string why;
  GDN_CHECK(visible_gpu_count(&why) > 0, "--device cuda: no GPU is visible (", why, ")");
  GDN_CHECK(reps > 0, "--reps ", reps, ": expected a positive count");
  Rng rng(7);
  for (const Shape& s : shapes) {
    auto x = random_device<float>(std::size_t(s.N) * s.in, rng),
         W = random_device<float>(std::size_t(s.out) * s.in, rng),
         dy = random_device<float>(std::size_t(s.N) * s.out, rng);
    DeviceBuffer<float> y(dy.size()), dx(x.size()), dW(W.size());
    for (const Precision p : {Precision::bf16, Precision::plain})
      time_passes(
          p == Precision::bf16 ? "linear_bf16" : "linear_f32", s, reps,
          [&] { ops::linear_forward(Cuda{}, p, x.data(), W.data(), s.N, s.in, s.out, y.data()); },
          [&] {
            ops::linear_backward(Cuda{}, p, x.data(), W.data(), dy.data(), s.N, s.in, s.out,
                                 dx.data(), dW.data());
          });
  }
  for (const Shape& s : grouped) {
    // Each row picks an expert uniformly (a balanced router): the counts vary as top-k's do.
    std::vector<std::int64_t> counts(std::size_t(s.E)), offsets(std::size_t(s.E) + 1);
    for (std::int64_t r = 0; r < s.N; ++r) ++counts[std::size_t(rng.uniform() * s.E) % s.E];
    for (int e = 0; e < s.E; ++e)
      offsets[std::size_t(e) + 1] = offsets[std::size_t(e)] + counts[std::size_t(e)];
    const auto d_offsets = to_device<Cuda>(offsets.data(), offsets.size());
    const std::int64_t stride = std::int64_t(s.out) * s.in;
    auto x = random_device<float>(std::size_t(s.N) * s.in, rng),
         W = random_device<float>(std::size_t(s.E) * stride, rng),
         dy = random_device<float>(std::size_t(s.N) * s.out, rng);
    DeviceBuffer<float> y(dy.size()), dx(x.size()), dW(W.size());
    for (const auto k : {ops::GroupedKernel::library, ops::GroupedKernel::tile}) {
      ops::set_grouped_kernel(k);
      time_passes(
          k == ops::GroupedKernel::library ? "grouped_bf16_library" : "grouped_bf16_tile", s, reps,
          [&] {
            ops::grouped_linear_forward(Cuda{}, Precision::bf16, x.data(), W.data(), stride,
                                        d_offsets.data(), s.E, s.N, s.in, s.out, y.data());
          },
          [&] {
            ops::grouped_linear_backward(Cuda{}, Precision::bf16, x.data(), W.data(), stride,
                                         dy.data(), d_offsets.data(), s.E, s.N, s.in, s.out,
                                         dx.data(), dW.data());
          });
    }
    ops::set_grouped_kernel(ops::GroupedKernel::library);
    // The same FLOPs as one dense linear: all R rows through one expert's weight.
    time_passes(
        "grouped_bf16_dense", s, reps,
        [&] {
          ops::linear_forward(Cuda{}, Precision::bf16, x.data(), W.data(), s.N, s.in, s.out,
                              y.data());
        },
        [&] {
          ops::linear_backward(Cuda{}, Precision::bf16, x.data(), W.data(), dy.data(), s.N, s.in,
                               s.out, dx.data(), dW.data());
        });
  }
  return 0;
}
#else
int run_cuda(const std::vector<Shape>&, const std::vector<Shape>&, int) {
  GDN_CHECK(false, "--device cuda: this build has no CUDA path (GDN_HAVE_CUDA is off)");
  return 1;
}
#endif

int run(int argc, char** argv) {
  cxxopts::Options o("gdn_gemm_bench",
                     "The linear layers' GEMM rates per shape, dtype (f32; bf16: the bf16 "
                     "mode's bf16 operands)\nand GEMM path, as JSON lines (a benchmark: "
                     "scripts/bench_gemm.sh runs it against torch).");
  o.add_options()("shapes", "N,in,out;... (tokens, input and output features)",
                  cxxopts::value<std::string>()->default_value(
                      "2048,512,1024;2048,1024,512;2048,512,4096;512,512,256"))(
      "dtypes", "f32, bf16 or both (comma-separated)",
      cxxopts::value<std::string>()->default_value("f32,bf16"))(
      "paths", "GEMM paths to time: all (every path this CPU runs) or the one in use (auto)",
      cxxopts::value<std::string>()->default_value("all"))(
      "reps", "timed runs per measurement (the fastest counts)",
      cxxopts::value<int>()->default_value("5"))(
      "device",
      "cpu, or cuda: the GPU's linears (default shapes: configs/gpu-step.json's) and "
      "grouped expert linears",
      cxxopts::value<std::string>()->default_value("cpu"))(
      "grouped", "cuda: R,in,out,E;... (routed rows, expert input and output features, experts)",
      cxxopts::value<std::string>()->default_value(kStepExperts))("h,help", "print this help");
  const auto res = o.parse(argc, argv);
  if (res.count("help")) {
    std::cout << o.help() << std::endl;
    return 0;
  }
  GDN_CHECK(res.unmatched().empty(), "unexpected argument '", res.unmatched().front(), "'");
  const std::string device = res["device"].as<std::string>();
  GDN_CHECK(device == "cpu" || device == "cuda", "--device ", device, ": expected cpu or cuda");
  if (device == "cuda") {
    const std::string shapes = res.count("shapes") ? res["shapes"].as<std::string>() : kStepShapes;
    return run_cuda(parse_shapes(shapes, "--shapes"),
                    parse_shapes(res["grouped"].as<std::string>(), "--grouped", true),
                    res["reps"].as<int>());
  }
  const std::vector<Shape> shapes = parse_shapes(res["shapes"].as<std::string>(), "--shapes");
  const std::string dtypes = res["dtypes"].as<std::string>(),
                    which = res["paths"].as<std::string>();
  GDN_CHECK(which == "all" || which == "auto", "--paths ", which, ": expected all or auto");
  const int reps = res["reps"].as<int>();
  GDN_CHECK(reps > 0, "--reps ", reps, ": expected a positive count");
  std::vector<std::string> dts;
  for (const char* d : {"f32", "bf16"})
    if (dtypes.find(d) != std::string::npos) dts.push_back(d);
  GDN_CHECK(!dts.empty(), "--dtypes ", dtypes, ": expected f32, bf16 or both");
  const std::vector<la::GemmPath> paths =
      which == "all" ? la::gemm_paths() : std::vector<la::GemmPath>{la::gemm_path()};

  Rng rng(7);
  for (const Shape& s : shapes) {
    std::vector<float> x(std::size_t(s.N) * s.in), W(std::size_t(s.out) * s.in),
        y(std::size_t(s.N) * s.out), dy(y.size()), dx(x.size()), dW(W.size());
    for (auto* v : {&x, &W, &dy})
      for (float& e : *v) e = float(rng.normal());
    for (const la::GemmPath p : paths) {
      la::set_gemm_path(p);
      for (const std::string& dt : dts) {
        const Precision mode = precision_of(dt == "bf16");
        const double flops = 2.0 * double(s.N) * s.in * s.out;
        const double fwd = best_ms(reps, [&] {
          ops::linear_forward(Host{}, mode, x.data(), W.data(), s.N, s.in, s.out, y.data());
        });
        const double bwd = best_ms(reps, [&] {
          ops::linear_backward(Host{}, mode, x.data(), W.data(), dy.data(), s.N, s.in, s.out,
                               dx.data(), dW.data());
        });
        for (const auto& [pass, ms, f] :
             {std::tuple{"forward", fwd, flops}, std::tuple{"backward", bwd, 2 * flops}})
          std::cout << nlohmann::json{{"side", "ours"},
                                      {"cpu", cpu_features().describe()},
                                      {"path", la::gemm_path_name(p)},
                                      {"dtype", dt},
                                      {"threads", omp_get_max_threads()},
                                      {"N", s.N},
                                      {"in", s.in},
                                      {"out", s.out},
                                      {"pass", pass},
                                      {"ms", ms},
                                      {"gflops", f / ms * 1e-6}}
                           .dump()
                    << std::endl;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gdn_gemm_bench: " << e.what() << std::endl;
    return 1;
  }
}
