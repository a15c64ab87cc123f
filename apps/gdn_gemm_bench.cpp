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
#include "ops/linear/linear.h"

using namespace gdn;

namespace {

struct Shape {
  std::int64_t N;
  int in, out;
};

// "N,in,out;N,in,out"
std::vector<Shape> parse_shapes(const std::string& s) {
  std::vector<Shape> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    Shape sh{};
    char c1 = 0, c2 = 0;
    std::stringstream is(item);
    GDN_CHECK(is >> sh.N >> c1 >> sh.in >> c2 >> sh.out && c1 == ',' && c2 == ',' && sh.N > 0 &&
                  sh.in > 0 && sh.out > 0,
              "--shapes: '", item, "' is not N,in,out with positive integers");
    out.push_back(sh);
  }
  GDN_CHECK(!out.empty(), "--shapes: no shape given");
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
      cxxopts::value<int>()->default_value("5"))("h,help", "print this help");
  const auto res = o.parse(argc, argv);
  if (res.count("help")) {
    std::cout << o.help() << std::endl;
    return 0;
  }
  GDN_CHECK(res.unmatched().empty(), "unexpected argument '", res.unmatched().front(), "'");
  const std::vector<Shape> shapes = parse_shapes(res["shapes"].as<std::string>());
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
