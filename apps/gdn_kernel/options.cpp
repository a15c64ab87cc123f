#include "gdn_kernel/options.h"

#include <cmath>

#include "common/app_common.h"
#include "core/error.h"
#include "cp/shard.h"
#include "gdn/problem.h"

namespace gdn::kernel_app {

cxxopts::Options make_options() {
  cxxopts::Options o("gdn_kernel",
                     "The gated delta rule (GDN) with context parallelism on .npy files.\n"
                     "Run under mpirun: each rank takes a contiguous shard of the sequence.\n"
                     "Inputs in --in: q.npy, k.npy [B,T,Hk,K]; v.npy [B,T,Hv,V]; g.npy (log-decay)"
                     ", beta.npy [B,T,Hv];\n  optional h0.npy [N,Hv,K,V], cu_seqlens.npy "
                     "(int32/int64 [N+1], B=1: packed sequences);\n  with --backward do.npy "
                     "[B,T,Hv,V] and optional dht.npy [N,Hv,K,V].\n"
                     "Inputs must be finite (g may be -inf: forget everything), beta in [0, 2].\n"
                     "Outputs in --out (rank 0): o.npy, ht.npy; with --backward dq, dk, dv, dg, "
                     "dbeta (and dh0 when h0 is given),\n  the gradients of sum(o*do) + "
                     "sum(ht*dht); stats.json (written last: a complete set has one) with the\n"
                     "  bytes each rank moved per call site.");
  o.add_options()("in", "input directory holding the .npy files", cxxopts::value<std::string>())(
      "out", "output directory (created by rank 0 if missing)", cxxopts::value<std::string>())(
      "backward", "also run the backward (needs do.npy; dht.npy optional)")(
      "chunk-size", "tokens per chunk: a power of two in [16, 128]",
      cxxopts::value<std::string>()->default_value(std::to_string(kDefaultChunkSize)))(
      "scale", "output scale s in o = s S^T q; 0 means 1/sqrt(K)",
      cxxopts::value<std::string>()->default_value("0"))(
      "l2norm-qk", "L2-normalise q and k inside the op (gradients go through the norm)")(
      "dtype",
      "compute and output dtype, f32 or f64 (default: the inputs' dtype, f64 if any "
      "input is f64)",
      cxxopts::value<std::string>())(
      "log-depth-scan",
      "combine the per-rank pairs with a Hillis-Steele scan over point-to-point messages "
      "(ceil(log2 P) rounds) instead of one all-gather; same result")(
      "load-balance",
      "sequence sharding: none (contiguous, in rank order) is the only one GDN allows; zigzag "
      "is refused with the reason",
      cxxopts::value<std::string>()->default_value("none"))(
      "device",
      "where the op runs: auto (cuda when this build has the CUDA path and a GPU is visible), "
      "cpu or cuda (one GPU per process; ranks sharing a GPU fall back to MPI with host "
      "staging)",
      cxxopts::value<std::string>()->default_value("auto"))(
      "watchdog-s", "end the job when a rank makes no progress for this many seconds (0: off)",
      cxxopts::value<std::string>()->default_value("600"))("h,help", "print this help");
  return o;
}

namespace {

// The value of a numeric flag; errors name the flag.
double number_flag(const cxxopts::ParseResult& res, const char* flag, const char* expected) {
  const std::string s = res[flag].as<std::string>();
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  GDN_CHECK(!s.empty() && used == s.size() && std::isfinite(x), "--", flag, " ", s, ": expected ",
            expected);
  return x;
}

}  // namespace

Args parse_args(int argc, char** argv) {
  auto options = make_options();
  const auto parsed = app::parse_command_line(options, argc, argv);
  Args a;
  if (!parsed) {
    a.help = true;
    return a;
  }
  const cxxopts::ParseResult& res = *parsed;
  GDN_CHECK(res.count("in"), "--in DIR is required (the directory holding q.npy, k.npy, ...)");
  GDN_CHECK(res.count("out"), "--out DIR is required (where o.npy, ht.npy, ... are written)");
  a.in = res["in"].as<std::string>();
  a.out = res["out"].as<std::string>();
  a.backward = res.count("backward") > 0;
  a.l2norm_qk = res.count("l2norm-qk") > 0;
  a.log_depth_scan = res.count("log-depth-scan") > 0;
  const double chunk = number_flag(res, "chunk-size", "a power of two in [16, 128]");
  GDN_CHECK(chunk == std::floor(chunk) && chunk >= 1 && chunk <= 1 << 20, "--chunk-size ",
            res["chunk-size"].as<std::string>(), ": expected a power of two in [16, 128]");
  a.chunk_size = int(chunk);
  a.scale = number_flag(res, "scale", "a finite number (0: 1/sqrt(K))");
  a.watchdog_s = number_flag(res, "watchdog-s", "a number of seconds >= 0");
  GDN_CHECK(a.watchdog_s >= 0, "--watchdog-s ", a.watchdog_s,
            ": expected a number of seconds >= 0");
  if (res.count("dtype")) {
    a.dtype = parse_real_dtype(res["dtype"].as<std::string>(), "--dtype");
  }
  a.device = app::resolve_device(res["device"].as<std::string>());
  // Refused on every rank before anything else: zigzag would silently compute garbage.
  require_contiguous_shards(parse_load_balance(res["load-balance"].as<std::string>()),
                            "--load-balance");
  return a;
}

}  // namespace gdn::kernel_app
