// gdn_plan: what a context-parallel training step of a config will cost, before it runs:
// FLOPs by component, bytes per Communicator call site and rank, the GDN / attention
// exchange crossover, memory per rank and the longest seq_len that fits, and with
// --cluster the predicted step time over cp degrees (src/plan). Serial; reads the config
// exactly as gdn_train does (a run file, or a bare Hugging Face config.json), with the
// same flags and checks for the layout.
//
//   gdn_plan --config configs/qwen3-next-80b-a3b.json --seq-len 8192 --cp 4 [--json]
//   gdn_plan --config hf/config.json --seq-len 1048576 --cp 16 --dp 2 --batch 2
//       --memory-gb 80 --cluster "nodes=4,gpus=8,nvlink_GBps=450,net_GBps=50" --rank-gflops 400000
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <cxxopts.hpp>
#include <iostream>

#include "common/app_common.h"
#include "common/deprecated_env.h"
#include "common/train_flags.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "plan/plan.h"
#include "train/run_config.h"
#include "train/run_layout.h"

using namespace gdn;

namespace {

// The train keys that shape a step; each keeps gdn_train's flag, help and checks.
const std::vector<std::string> kLayoutKeys = {
    "seq_len",   "batch_size", "cp",        "dp",         "ep",
    "dtype",     "shard",      "recompute", "chunk_size", "attention_load_balance",
    "pair_scan", "gemm_path",  "cuda_walk", "cuda_tf32",  "attention_backend"};

cxxopts::Options make_options() {
  cxxopts::Options o("gdn_plan",
                     "What a context-parallel training step of a config costs, from the config "
                     "alone: FLOPs per component, bytes per Communicator call site and rank, the "
                     "GDN / attention exchange crossover, memory per rank, and with --cluster the "
                     "step time over cp degrees. Flags in brackets override that train key of "
                     "the config, with gdn_train's checks.");
  o.add_options()("config",
                  "run config {\"model\": ..., \"train\": ...}, or a bare Hugging Face "
                  "config.json (with --seq-len, or --train-config)",
                  cxxopts::value<std::string>())(
      "train-config", "JSON file with the train settings ({\"train\": {...}} or {...})",
      cxxopts::value<std::string>());
  app::add_train_flags(o, kLayoutKeys);
  o.add_options()("memory-gb",
                  "memory per rank in GiB (2^30 bytes): report the longest seq_len whose "
                  "estimate fits, at cp = 1, 2, 4, ... (at least up to 8 and --cp)",
                  cxxopts::value<std::string>())(
      "cluster",
      "a cluster on paper, \"nodes=N,gpus=8,nvlink_GBps=X,net_GBps=Y[,nvlink_us=2,net_us=5]\": "
      "bandwidths per GPU in GB/s (1e9 bytes/s), latencies per message; ranks fill the nodes in "
      "order. Predicts the step time (compute + communication, latency-bandwidth model of each "
      "collective) at this cp and over cp = 1, 2, 4, ...",
      cxxopts::value<std::string>())(
      "rank-gflops",
      "sustained GFLOP/s of one rank, for --cluster: gdn_bench's \"gflops\" on this machine, or "
      "a figure for the GPU (FLOPs are counted as in gdn_bench)",
      cxxopts::value<std::string>())("json", "print one JSON document instead of the tables")(
      "h,help", "print this help");
  return o;
}

// A number > 0 and <= hi: the bound keeps what it is scaled to finite (no "inf GFLOP/s").
double positive_number(const cxxopts::ParseResult& res, const char* flag, double hi) {
  const std::string text = res[flag].as<std::string>();
  const std::optional<double> v = parse_decimal(text);
  GDN_CHECK(v && *v > 0, "--", flag, " ", text, ": expected a decimal number > 0");
  GDN_CHECK(*v <= hi, "--", flag, " ", text, ": expected a number <= ", hi);
  return *v;
}

int run(int argc, char** argv) {
  auto options = make_options();
  const auto parsed = app::parse_command_line(options, argc, argv);
  if (!parsed) {
    std::cout << options.help() << std::endl;
    return 0;
  }
  const cxxopts::ParseResult& res = *parsed;
  GDN_CHECK(res.count("config"), "--config FILE is required (a run config or a config.json)");
  RunConfig cfg =
      load_config(res["config"].as<std::string>(),
                  res.count("train-config") ? res["train-config"].as<std::string>() : "");
  app::apply_train_flags(res, cfg.train, kLayoutKeys);
  std::vector<std::string> env_warnings;  // the old kernel variables, as gdn_train takes them
  app::take_deprecated_env(cfg.train, env_warnings);
  for (const std::string& w : env_warnings) spdlog::warn("{}", w);
  app::report_model_keys(cfg.source, cfg.ignored_model_keys, cfg.model_notes);
  const plan::PlanInput in = plan::plan_input(cfg);
  plan::PlanOptions opt;
  if (res.count("memory-gb"))
    opt.memory_budget = positive_number(res, "memory-gb", 1e9) * 1073741824.0;
  if (res.count("rank-gflops"))
    opt.rank_flops_per_s = positive_number(res, "rank-gflops", 1e12) * 1e9;
  if (res.count("cluster")) opt.cluster = plan::parse_cluster(res["cluster"].as<std::string>());
  GDN_CHECK(res.count("cluster") || !res.count("rank-gflops"),
            "--rank-gflops is used with --cluster (the cluster the step runs on)");
  const plan::Plan p = plan::make_plan(in, opt);
  // The run's layout as gdn_train resolves it (train/run_layout.h), on this machine's CPU.
  nlohmann::json layout;
  std::string line;
  try {
    const RunLayout l = resolve_layout(cfg.train, p.scan);
    layout = l.to_json();
    line = l.describe();
  } catch (const Error& e) {
    layout = {{"error", e.what()}};
    line = e.what();
  }
  if (res.count("json")) {
    nlohmann::json j = plan::to_json(p);
    j["run_layout"] = layout;
    std::cout << j.dump(1) << std::endl;
  } else {
    plan::print_table(p, std::cout);
    std::cout << "layout (gdn_train's, on this CPU): " << line << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return app::serial_main("gdn_plan", run, argc, argv);
}
