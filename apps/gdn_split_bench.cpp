// gdn_split_bench: times the intra-rank sequence split (gdn/split/split_pass.h, docs/design.md
// §4b) against the unsplit passes, side by side in one run, and prints the benchmark table
// on stdout (common/bench_table.h), or with --json JSON lines. The table's check column
// compares each variant's outputs and gradients (of its last run) with the token-by-token
// recurrence in fp64 on the same inputs, and each piece scan with the maps applied one by
// one in fp64; a wrong row makes the exit code 1. The JSON lines assert nothing.
//
// Every variant is GdnContextParallel<T, Host> on one rank (what a GDN layer runs at
// cp = 1), kept from run to run as a layer keeps it, with CpOptions::split_pieces = 1
// (unsplit) or S and the piece scan serial or log-depth. The timed runs are interleaved
// (rep 1 of every variant, then rep 2, ...) so that a noisy machine slows all alike; each
// line has the median. Then one line per (shape, variant) with its speedup over the
// unsplit op (of the medians, and of the minima), and, with --scan-only, the piece scans alone
// (serial chain vs log depth) at each S, which isolates the chain's latency from the passes.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cxxopts.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "comm/single_communicator.h"
#include "common/app_common.h"
#include "common/bench_table.h"
#include "common/deprecated_env.h"
#include "common/gdn_reference.h"
#include "core/error.h"
#include "core/rng.h"
#include "cp/gdn_cp.h"
#include "gdn/random_inputs.h"
#include "gdn/split/split_scan.h"

using namespace gdn;
using json = nlohmann::ordered_json;

namespace {

struct Settings {
  int chunk_size = kDefaultChunkSize, reps = 5, warmup = 1;
  std::vector<int> pieces;
  std::vector<bool> log_depth;  // piece scans to time
  bool scan_only = false;
  app::BenchTable* table = nullptr;  // the table's rows; null: JSON lines (--json)
  double tol = 0;                    // the check's tolerance (rel L2)
};

json shape_json(const GdnProblem& p) {
  return {{"B", p.B}, {"T", p.T}, {"Hk", p.Hk}, {"Hv", p.Hv}, {"K", p.K}, {"V", p.V}};
}

double elapsed_ms(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Variant {
  std::string name;  // unsplit, or split_S<S>_<serial|log_depth>
  int pieces;
  bool log_depth;
};

// One variant's op and outputs, kept across the timed runs.
template <typename T>
struct Runner {
  GdnProblem p;
  CpOptions opt;
  const GdnInputView<T>& in;
  const T* dO;
  const T* dht;
  SingleCommunicator comm;
  GdnContextParallel<T, Host> op;
  Tensor<T> o, ht, dq, dk, dv, dg, dbeta, dh0;
  Runner(const GdnProblem& p_, const Variant& v, const GdnInputView<T>& in_, const T* dO_,
         const T* dht_)
      : p(p_),
        in(in_),
        dO(dO_),
        dht(dht_),
        o({p.B, p.T, p.Hv, p.V}),
        ht({p.num_sequences(), p.Hv, p.K, p.V}),
        dq({p.B, p.T, p.Hk, p.K}),
        dk(dq.shape),
        dv(o.shape),
        dg({p.B, p.T, p.Hv}),
        dbeta(dg.shape),
        dh0(ht.shape) {
    opt.split_pieces = v.pieces;
    opt.split_log_depth = v.log_depth;
  }
  void forward() { op.forward(CpContext::contiguous(comm, p.T, opt), p, in, o.ptr(), ht.ptr()); }
  void forward_backward() {
    forward();
    GdnGradView<T> g{dq.ptr(), dk.ptr(), dv.ptr(), dg.ptr(), dbeta.ptr(), dh0.ptr()};
    op.backward(CpContext::contiguous(comm, p.T, opt), dO, dht, g);
  }
};

// Times every variant at one shape, interleaved; prints a line per (variant, mode) and
// one per split variant with its speedups over the unsplit op.
template <typename T>
void bench_shape(const GdnProblem& p, const Settings& s, const char* dtype) {
  const GdnInputs<T> d = random_gdn_inputs<T>(p, /*seed=*/1, /*with_h0=*/true);
  Rng rng(2);
  Tensor<T> dO({p.B, p.T, p.Hv, p.V}), dht({p.num_sequences(), p.Hv, p.K, p.V});
  for (T& x : dO.data) x = T(rng.normal());
  for (T& x : dht.data) x = T(rng.normal());
  const GdnInputView<T> in = d.view();

  std::vector<Variant> variants = {{"unsplit", 1, false}};
  for (int S : s.pieces)
    for (bool log_depth : s.log_depth)
      variants.push_back(
          {"split_S" + std::to_string(S) + (log_depth ? "_log_depth" : "_serial"), S, log_depth});
  std::vector<std::unique_ptr<Runner<T>>> runners;
  for (const Variant& v : variants)
    runners.push_back(std::make_unique<Runner<T>>(p, v, in, dO.ptr(), dht.ptr()));

  std::map<std::string, std::vector<double>> fwd, fwd_bwd;
  for (int rep = -s.warmup; rep < s.reps; ++rep)
    for (std::size_t i = 0; i < variants.size(); ++i) {
      Runner<T>& r = *runners[i];
      const double f = elapsed_ms([&] { r.forward(); });
      const double fb = elapsed_ms([&] { r.forward_backward(); });
      if (rep < 0) continue;
      fwd[variants[i].name].push_back(f);
      fwd_bwd[variants[i].name].push_back(fb);
    }
  // The minimum beside the median: on a shared machine the split's two busy threads lose
  // more to a neighbour than the unsplit pass's one, and the minimum is the least disturbed.
  auto least = [](const std::vector<double>& x) { return *std::min_element(x.begin(), x.end()); };
  std::map<std::string, std::pair<double, double>> medians, minima;
  std::optional<app::GdnReference> ref;  // the table's, after the timed runs
  if (s.table) ref = app::gdn_reference(p, in, in.h0, dO.ptr(), dht.ptr(), true);
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    const double f = app::median(fwd[v.name]), fb = app::median(fwd_bwd[v.name]);
    medians[v.name] = {f, fb};
    minima[v.name] = {least(fwd[v.name]), least(fwd_bwd[v.name])};
    for (const auto& [mode, ms, min] : {std::tuple{"fwd", f, minima[v.name].first},
                                        std::tuple{"fwd_bwd", fb, minima[v.name].second}}) {
      if (s.table) {  // the last run was a forward + backward: o, ht and the gradients
        Runner<T>& r = *runners[i];
        const GdnGradView<T> g{r.dq.ptr(), r.dk.ptr(),    r.dv.ptr(),
                               r.dg.ptr(), r.dbeta.ptr(), r.dh0.ptr()};
        const bool fwd = std::string(mode) == "fwd";
        // over the unsplit op (variants[0], done first): of the medians, of the minima
        auto speedup = [&](const std::map<std::string, std::pair<double, double>>& m) {
          const auto [u, mine] = std::pair{m.at("unsplit"), m.at(v.name)};
          return v.pieces == 1 ? NAN : fwd ? u.first / mine.first : u.second / mine.second;
        };
        const double e =
            fwd ? app::outputs_error(*ref, r.o.ptr(), r.ht.ptr()) : app::grads_error(*ref, g, true);
        s.table->row(
            app::shape_cells(
                p, {v.name, mode, std::to_string(r.op.piece_split().pieces), app::fixed(ms, 3),
                    app::fixed(min, 3), app::fixed(double(p.B) * p.T / (ms * 1e-3) * 1e-6, 3),
                    app::fixed(speedup(medians), 2), app::fixed(speedup(minima), 2)}),
            {e, s.tol});
        continue;
      }
      const json line = {{"shape", shape_json(p)},
                         {"variant", v.name},
                         {"mode", mode},
                         {"pieces", runners[i]->op.piece_split().pieces},
                         {"scan", v.pieces == 1 ? "none"
                                  : v.log_depth ? "log_depth"
                                                : "serial"},
                         {"dtype", dtype},
                         {"chunk_size", p.chunk_size},
                         {"median_ms", ms},
                         {"min_ms", min},
                         {"tokens_per_s", double(p.B) * p.T / (ms * 1e-3)},
                         {"reps", s.reps},
                         {"threads", omp_get_max_threads()}};
      std::cout << line.dump() << std::endl;
    }
  }
  if (s.table) return;  // the speedups are the table's columns
  const auto [uf, ufb] = medians.at("unsplit");
  const auto [uf_min, ufb_min] = minima.at("unsplit");
  for (const Variant& v : variants) {
    if (v.pieces == 1) continue;
    const auto [f, fb] = medians.at(v.name);
    const auto [f_min, fb_min] = minima.at(v.name);
    std::cout << json{{"shape", shape_json(p)},
                      {"variant", v.name},
                      {"speedup_fwd", uf / f},
                      {"speedup_fwd_bwd", ufb / fb},
                      {"speedup_fwd_min", uf_min / f_min},
                      {"speedup_fwd_bwd_min", ufb_min / fb_min},
                      {"threads", omp_get_max_threads()}}
                     .dump()
              << std::endl;
  }
}

// The piece scans alone: S - 1 random pairs (the forward's phase 2) from a random entry
// state, serial chain against log depth, median of --reps after --warmup.
template <typename T>
void bench_scans(const GdnProblem& p, const Settings& s, const char* dtype) {
  const PairDims dims{p.B * p.Hv, p.K, p.V};
  for (int S : s.pieces) {
    const int n = S - 1;
    Rng rng(3);
    std::vector<T> pairs(std::size_t(n) * dims.pair_elems()), x_in(dims.b_elems()),
        out(std::size_t(n) * dims.b_elems());
    for (T& x : pairs) x = T(0.1 * rng.normal());
    for (T& x : x_in) x = T(rng.normal());
    PiecePairs<T> f;
    std::vector<T*> outs;
    for (int j = 0; j < n; ++j) {
      f.A.push_back(pairs.data() + j * dims.pair_elems());
      f.B.push_back(f.A.back() + dims.a_elems());
      outs.push_back(out.data() + j * dims.b_elems());
    }
    // The check's reference: the maps applied one by one in fp64, x_{j+1} = A_j x_j + B_j.
    std::vector<double> want(out.size());
    if (s.table) {
      const std::size_t K = std::size_t(p.K), V = std::size_t(p.V);
      std::vector<double> x(x_in.begin(), x_in.end());
      for (int j = 0; j < n; ++j) {
        double* y = want.data() + std::size_t(j) * dims.b_elems();
        for (std::size_t bh = 0; bh < std::size_t(dims.BH); ++bh)
          for (std::size_t r = 0; r < K; ++r)
            for (std::size_t c = 0; c < V; ++c) {
              double acc = double(f.B[j][(bh * K + r) * V + c]);
              for (std::size_t l = 0; l < K; ++l)
                acc += double(f.A[j][(bh * K + r) * K + l]) * x[(bh * K + l) * V + c];
              y[(bh * K + r) * V + c] = acc;
            }
        x.assign(y, y + dims.b_elems());
      }
    }
    for (bool log_depth : s.log_depth) {
      std::vector<double> ms;  // reported: the minimum (one short call is easily preempted)
      for (int rep = -s.warmup; rep < s.reps; ++rep) {
        const double t = elapsed_ms([&] { scan_pieces(f, dims, log_depth, x_in.data(), outs); });
        if (rep >= 0) ms.push_back(t);
      }
      if (s.table) {
        const double mid = app::median(ms), least = *std::min_element(ms.begin(), ms.end());
        s.table->row(
            app::shape_cells(
                p, {std::string("scan_only_") + (log_depth ? "log_depth" : "serial"), "scan",
                    std::to_string(S), app::fixed(mid, 3), app::fixed(least, 3), "-", "-", "-"}),
            {app::rel_l2_error(out, want), s.tol});
        continue;
      }
      std::cout << json{{"shape", shape_json(p)},
                        {"scan_only", log_depth ? "log_depth" : "serial"},
                        {"pieces", S},
                        {"dtype", dtype},
                        {"median_ms", app::median(ms)},
                        {"min_ms", *std::min_element(ms.begin(), ms.end())},
                        {"threads", omp_get_max_threads()}}
                       .dump()
                << std::endl;
    }
  }
}

int run(int argc, char** argv) {
  app::apply_deprecated_env();  // the kernel choices of the old variables, warned
  cxxopts::Options o(
      "gdn_split_bench",
      "Times the intra-rank sequence split of the GDN passes (GdnContextParallel on one rank, "
      "S pieces,\nserial-chain or log-depth piece scan) against the unsplit passes, forward "
      "and forward+backward,\ninterleaved in one run. Prints JSON lines: one per (shape, "
      "variant, mode) with the median, one per\nsplit variant with its speedups. Threads: "
      "OMP_NUM_THREADS.");
  o.add_options()(
      "shapes", "shapes as 'B,T,Hk,Hv,K,V;...'",
      cxxopts::value<std::string>()->default_value("1,16384,1,1,128,128;1,16384,1,2,128,128"))(
      "pieces", "S values to time, comma-separated",
      cxxopts::value<std::string>()->default_value("2,4"))(
      "scans", "piece scans: serial, log_depth or both",
      cxxopts::value<std::string>()->default_value("both"))(
      "dtype", "f32 or f64", cxxopts::value<std::string>()->default_value("f32"))(
      "chunk-size", "chunk size: a power of two in [16, 128]",
      cxxopts::value<int>()->default_value(std::to_string(kDefaultChunkSize)))(
      "reps", "timed runs per variant (the median is reported)",
      cxxopts::value<int>()->default_value("5"))("warmup", "untimed runs per variant first",
                                                 cxxopts::value<int>()->default_value("1"))(
      "scan-only", "also time the piece scans alone at each S")(
      "json", "JSON lines instead of the table (no check against the fp64 reference)")(
      "h,help", "print this help");
  const auto res = app::parse_command_line(o, argc, argv);
  if (!res) {
    std::cout << o.help() << std::endl;
    return 0;
  }
  Settings s;
  s.chunk_size = (*res)["chunk-size"].as<int>();
  s.reps = (*res)["reps"].as<int>();
  s.warmup = (*res)["warmup"].as<int>();
  s.scan_only = res->count("scan-only") > 0;
  GDN_CHECK(s.reps >= 1 && s.warmup >= 0, "--reps must be >= 1 and --warmup >= 0");
  for (std::int64_t S : app::parse_int_list((*res)["pieces"].as<std::string>(), ',', "--pieces")) {
    GDN_CHECK(S >= 2 && S <= 4096, "--pieces: ", S, " is not a piece count in [2, 4096]");
    s.pieces.push_back(int(S));
  }
  const std::string scans = (*res)["scans"].as<std::string>();
  GDN_CHECK(scans == "serial" || scans == "log_depth" || scans == "both", "--scans ", scans,
            ": expected serial, log_depth or both");
  if (scans != "log_depth") s.log_depth.push_back(false);
  if (scans != "serial") s.log_depth.push_back(true);
  const DType dtype = parse_real_dtype((*res)["dtype"].as<std::string>(), "--dtype");
  const bool json = res->count("json") > 0;
  if (!json)
    std::cout << "# gdn_split_bench " << dtype_name(dtype) << ", chunk size " << s.chunk_size
              << ", " << omp_get_max_threads() << " threads, " << s.reps
              << " interleaved reps after " << s.warmup << " warm-up" << std::endl;
  std::optional<app::BenchTable> table =
      app::open_shape_table(json, {{"variant", "", 20}, {"mode", "", 7}, {"S", "", 4}},
                            {{"speedup", "(x)", 7}, {"min_sp", "(x)", 7}});
  if (table) {
    s.table = &*table;
    s.tol = app::check_tolerance(dtype);
  }

  for (const GdnProblem& p :
       app::parse_gdn_shapes((*res)["shapes"].as<std::string>(), s.chunk_size)) {
    if (dtype == DType::f64) {
      bench_shape<double>(p, s, "f64");
      if (s.scan_only) bench_scans<double>(p, s, "f64");
    } else {
      bench_shape<float>(p, s, "f32");
      if (s.scan_only) bench_scans<float>(p, s, "f32");
    }
  }
  if (!table) return 0;
  return table->exit_status(
      {"check: rel L2 of o and ht (fwd), of every gradient (fwd_bwd) against "
       "the recurrence in fp64 on the same inputs, of a scan's outputs against "
       "its maps applied one by one in fp64; tolerance " +
           app::sci(s.tol, 0),
       "S: the pieces the op cut; speedup: over the unsplit op, of the medians "
       "(min_sp: of the minima)"});
}

}  // namespace

int main(int argc, char** argv) {
  return gdn::app::serial_main("gdn_split_bench", run, argc, argv);
}
