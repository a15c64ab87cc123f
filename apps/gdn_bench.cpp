// gdn_bench: times the single-rank chunked gated delta rule against the token-by-token
// recurrence, side by side in one run, and prints JSON lines on stdout:
//   one per (shape, variant) with the median of --reps timed runs after --warmup, then one
//   with the ratios recurrent / chunked. A benchmark, not a test: nothing is asserted.
#include <omp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cxxopts.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app_common.h"
#include "core/error.h"
#include "core/rng.h"
#include "gdn/op.h"
#include "gdn/random_inputs.h"
#include "gdn/recurrent.h"

using namespace gdn;
using json = nlohmann::ordered_json;

namespace {

struct Settings {
  int chunk_size = 64, reps = 5, recurrent_reps = 3, warmup = 1;
  std::int64_t skip_recurrent_above = 16384;
};

json shape_json(const GdnProblem& p) {
  return {{"B", p.B}, {"T", p.T}, {"Hk", p.Hk}, {"Hv", p.Hv}, {"K", p.K}, {"V", p.V}};
}

// Median wall time in milliseconds of `reps` calls of fn, after `warmup` untimed calls.
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

// Times every variant at one shape; prints a line per variant and returns the medians.
template <typename T>
std::map<std::string, double> bench_shape(const GdnProblem& p, const Settings& s) {
  const GdnData<T> d = random_gdn_inputs<T>(p, /*seed=*/1, /*with_h0=*/true);
  const GdnTensors<T> in = d.view();
  const Shape state = {p.num_sequences(), p.Hv, p.K, p.V};
  Rng rng(2);
  Tensor<T> o({p.B, p.T, p.Hv, p.V}), ht(state), dO(o.shape), dht(state);
  for (T& x : dO.data) x = T(rng.normal());
  for (T& x : dht.data) x = T(rng.normal());
  Tensor<T> dq(d.q.shape), dk(d.k.shape), dv(d.v.shape), dg(d.g.shape), dbeta(d.beta.shape),
      dh0(state);
  GdnGrads<T> grads{dq.ptr(), dk.ptr(), dv.ptr(), dg.ptr(), dbeta.ptr(), dh0.ptr()};

  // The chunked variants include the constructor: it does the L2 norm and allocations
  // that a caller pays on every call.
  std::vector<std::pair<std::string, std::function<void()>>> variants = {
      {"chunked_fwd", [&] { ChunkedGdn<T>(p, in).forward(o.ptr(), ht.ptr()); }},
      {"chunked_fwd_bwd",
       [&] {
         ChunkedGdn<T> op(p, in);
         op.forward(o.ptr(), ht.ptr());
         op.backward(dO.ptr(), dht.ptr(), grads);
       }},
  };
  if (p.T <= s.skip_recurrent_above) {
    variants.push_back({"recurrent_fwd", [&] { recurrent_forward(p, in, o.ptr(), ht.ptr()); }});
    variants.push_back({"recurrent_fwd_bwd", [&] {
                          recurrent_forward(p, in, o.ptr(), ht.ptr());
                          recurrent_backward(p, in, dO.ptr(), dht.ptr(), grads);
                        }});
  }
  std::map<std::string, double> out;
  for (const auto& [name, fn] : variants) {
    const bool recurrent = name.rfind("recurrent", 0) == 0;
    const int reps = recurrent ? s.recurrent_reps : s.reps;
    const double ms = median_ms(fn, s.warmup, reps);
    out[name] = ms;
    const json line = {{"shape", shape_json(p)},
                       {"variant", name},
                       {"dtype", dtype_name(dtype_of<T>())},
                       {"chunk_size", p.chunk_size},
                       {"median_ms", ms},
                       {"tokens_per_s", double(p.B) * p.T / (ms * 1e-3)},
                       {"reps", reps},
                       {"warmup", s.warmup},
                       {"threads", omp_get_max_threads()}};
    std::cout << line.dump() << std::endl;
  }
  return out;
}

int run(int argc, char** argv) {
  cxxopts::Options o("gdn_bench",
                     "Times the chunked gated delta rule (forward; forward+backward) against the "
                     "token-by-token recurrence\nat a few shapes in one run. Prints one JSON line "
                     "per (shape, variant) with the median of --reps runs,\nthen one line with "
                     "the ratios recurrent / chunked. Threads: OMP_NUM_THREADS.");
  o.add_options()("shapes", "shapes as 'B,T,Hk,Hv,K,V;...'",
                  cxxopts::value<std::string>()->default_value(
                      "1,1024,2,4,64,64;1,4096,2,4,64,64;1,16384,2,4,64,64"))(
      "dtype", "f32 or f64", cxxopts::value<std::string>()->default_value("f32"))(
      "chunk-size", "chunk size of the chunked op: a power of two in [16, 128]",
      cxxopts::value<int>()->default_value("64"))(
      "reps", "timed runs per chunked variant (the median is reported)",
      cxxopts::value<int>()->default_value("5"))(
      "recurrent-reps", "timed runs per recurrent variant (it is slow at large T)",
      cxxopts::value<int>()->default_value("3"))("warmup",
                                                 "untimed runs before timing each variant",
                                                 cxxopts::value<int>()->default_value("1"))(
      "skip-recurrent-above", "skip the recurrence for shapes with T above this",
      cxxopts::value<std::int64_t>()->default_value("16384"))("h,help", "print this help");
  auto res = o.parse(argc, argv);
  if (res.count("help")) {
    std::cout << o.help() << std::endl;
    return 0;
  }
  GDN_CHECK(res.unmatched().empty(), "unexpected argument '", res.unmatched().front(), "'");
  Settings s;
  s.chunk_size = res["chunk-size"].as<int>();
  s.reps = res["reps"].as<int>();
  s.recurrent_reps = res["recurrent-reps"].as<int>();
  s.warmup = res["warmup"].as<int>();
  s.skip_recurrent_above = res["skip-recurrent-above"].as<std::int64_t>();
  GDN_CHECK(s.reps >= 1 && s.recurrent_reps >= 1 && s.warmup >= 0,
            "--reps and --recurrent-reps must be >= 1 and --warmup >= 0");
  const std::string dtype = res["dtype"].as<std::string>();
  GDN_CHECK(dtype == "f32" || dtype == "f64", "--dtype ", dtype, ": expected f32 or f64");

  std::vector<GdnProblem> shapes;
  const std::string spec = res["shapes"].as<std::string>();
  std::size_t pos = 0;
  while (pos < spec.size()) {
    const std::size_t end = std::min(spec.find(';', pos), spec.size());
    const auto v = app::parse_int_list(spec.substr(pos, end - pos), ',', "--shapes");
    GDN_CHECK(v.size() == 6, "--shapes: '", spec.substr(pos, end - pos), "' has ", v.size(),
              " numbers, expected 6: B,T,Hk,Hv,K,V");
    GdnProblem p;
    p.B = int(v[0]), p.T = int(v[1]), p.Hk = int(v[2]), p.Hv = int(v[3]), p.K = int(v[4]),
    p.V = int(v[5]);
    p.chunk_size = s.chunk_size;
    p.validate();
    shapes.push_back(p);
    pos = end + 1;
  }

  json ratios = json::array();
  for (const auto& p : shapes) {
    const auto ms = dtype == "f64" ? bench_shape<double>(p, s) : bench_shape<float>(p, s);
    if (!ms.count("recurrent_fwd")) continue;
    ratios.push_back({{"shape", shape_json(p)},
                      {"fwd", ms.at("recurrent_fwd") / ms.at("chunked_fwd")},
                      {"fwd_bwd", ms.at("recurrent_fwd_bwd") / ms.at("chunked_fwd_bwd")}});
  }
  std::cout << json{{"ratios_recurrent_over_chunked", ratios}, {"dtype", dtype}}.dump()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gdn::app::serial_main("gdn_bench", run, argc, argv);
}
