// gdn_train: trains a language model with context parallelism, one process per rank.
//
//   mpirun -np DP*CP gdn_train --config configs/tiny-qwen3-next.json [--cp 2] [--dp 1] ...
//   mpirun -np P gdn_train --config hf/config.json --train-config train.json ...
//   mpirun -np P gdn_train --init-from HF_DIR --train-config train.json [--export-hf OUT]
//
// Every train key of the config has a flag (the table of train/train_config.h), with the
// key's checks. Set-up (flags, config, layout, data, memory estimate, resume) runs on every
// rank and the ranks agree on the outcome before training, so bad input gives one message
// and exit code 1 everywhere. A non-finite loss stops the run on every rank at that step
// (exit 1); any other failure during training, or a rank that stops making progress
// (--watchdog-s), ends the whole job. SIGTERM or SIGUSR1 (--stop-signals) stops every
// rank at the same step boundary, saves a checkpoint there and exits with 75 (preempted,
// resumable). Rank 0 holds the locks of the checkpoint directory and of every output
// (train/run_lock.h) for the whole run, after checking that no output is an input
// (train/run_paths.h); an export that fails after training leaves the weights in a
// checkpoint and says where.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>

#include "comm/call_sites.h"
#include "comm/mpi_communicator.h"
#include "common/app_common.h"
#include "common/deprecated_env.h"
#include "common/device_flag.h"
#include "common/flop_rate.h"
#include "common/train_flags.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/stop_signal.h"
#include "core/watchdog.h"
#include "cp/shard.h"
#include "model/hf_weights.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/hf_export.h"
#include "train/optimizer.h"
#include "train/run_config.h"
#include "train/run_identity.h"
#include "train/run_lock.h"
#include "train/run_paths.h"
#include "train/trainer.h"
#if GDN_HAVE_CUDA
#include "runtime/cuda_device.h"
#endif

using namespace gdn;

namespace {

cxxopts::Options make_options() {
  cxxopts::Options o(
      "gdn_train",
      "Trains a Gated DeltaNet language model with context parallelism: world = dp x cp ranks,\n"
      "each cp group holds its sequences in contiguous shards in rank order. Run under mpirun\n"
      "with -np dp*cp. Each train flag overrides the config's \"train\" key named in brackets\n"
      "and gets the same checks.");
  o.add_options()("config",
                  "run config {\"model\": <Hugging Face config>, \"train\": {...}}, or a bare "
                  "Hugging Face config.json (model_type qwen3_next, qwen3_5, qwen3_5_moe) with the "
                  "train settings from --train-config and flags",
                  cxxopts::value<std::string>())(
      "train-config", "JSON file with the train settings ({\"train\": {...}} or {...})",
      cxxopts::value<std::string>())(
      "init-from",
      "Hugging Face checkpoint directory (config.json, model.safetensors or an index and its "
      "shards): the model is its config.json, the initial weights its tensors; with --config "
      "too, both must describe the same architecture",
      cxxopts::value<std::string>())(
      "export-hf",
      "at the end, write the weights as a Hugging Face checkpoint (config.json and "
      "model.safetensors, or model-0000i-of-0000n.safetensors and their index past "
      "--export-hf-max-mb) to this directory (created, and checked writable, at start-up); "
      "the tensors go through rank 0 one file at a time",
      cxxopts::value<std::string>())(
      "export-hf-max-mb",
      "the largest safetensors file of --export-hf in MB (10^6 bytes), as save_pretrained's "
      "max_shard_size",
      cxxopts::value<std::string>()->default_value("5000"))(
      "export-dtype",
      "f32, f64 or bf16: the dtype of --export-hf's tensors (default: bf16 for a bf16 run, "
      "whose f32 master weights are rounded to nearest; otherwise the run's dtype)",
      cxxopts::value<std::string>())(
      "exchange-out",
      "after the first step, write every rank's exact Communicator counters of that step "
      "(calls, bytes sent and received per call site) to this JSON file: what gdn_plan "
      "predicts",
      cxxopts::value<std::string>());
  app::add_train_flags(o);
  o.add_options()(
      "resume",
      "continue from the newest complete checkpoint in the checkpoint directory; refused when "
      "it was written by another architecture, or by another run (its seed, data and size, "
      "seq_len, batch, documents, or model and optimizer settings differ: each difference "
      "is named)")(
      "accept-changes",
      "with --resume: continue a checkpoint whose run differed in these keys, as intended "
      "(comma-separated: seed, data, data_bytes, seq_len, batch_size, documents, config, "
      "schedule: a --steps or lr schedule under which a step already taken would have had "
      "another lr). None of them continues the same curve: a new seed or data file is "
      "another run. Safe without this flag: another layout (dp, cp, ep, shard), dtype, "
      "recompute, a --steps that leaves the steps taken as they were",
      cxxopts::value<std::string>())(
      "stop-signals",
      "signals that stop the run gracefully (comma-separated of TERM, INT, HUP, USR1, USR2, "
      "QUIT, XCPU; or none): at the next step boundary every rank stops at the same step, "
      "writes a checkpoint and exits with status 75 (preempted, resumable); a second signal "
      "does not interrupt the save. Slurm sends SIGTERM on scancel, preemption and the time "
      "limit, KillWait (30 s) before SIGKILL",
      cxxopts::value<std::string>()->default_value("TERM,USR1"))(
      "lock-stale-s",
      "the locks of the checkpoint directory and of every output (--log, --export-hf, "
      "--exchange-out), held by rank 0 for the whole run with a heartbeat that records this "
      "bound: another host's lock whose heartbeat is older than the larger of its holder's "
      "bound and this one is taken over with a warning; one whose run was on this host and "
      "has ended is taken over at once. A run whose lock was taken over stops at its next "
      "step without writing (exit 1)",
      cxxopts::value<std::string>()->default_value("300"))(
      "peak-tflops",
      "one rank's peak TFLOP/s, which the step line's MFU (model FLOPs utilisation) is "
      "against; default: on a GPU its dense datasheet peak for the run's dtype (H100 and "
      "H200 SXM: 989 bf16), on a CPU its FMA peak measured at start-up",
      cxxopts::value<std::string>())(
      "overwrite-checkpoints",
      "a run without --resume refuses a checkpoint directory that holds checkpoints of an "
      "earlier run (it would overwrite some and leave the rest for a later --resume); this "
      "deletes them at start-up instead")(
      "load-balance",
      "sequence sharding: none (contiguous, in rank order) is the only one GDN allows; zigzag "
      "is refused with the reason",
      cxxopts::value<std::string>()->default_value("none"))(
      "device",
      "auto | cpu | cuda: where the model runs. auto is cuda when this build has the CUDA path "
      "and a GPU is visible, else cpu. On cuda each rank takes a GPU; activations, parameters "
      "and AdamW moments live there, gradients are summed by NCCL (or MPI with host staging "
      "when ranks share a GPU)",
      cxxopts::value<std::string>()->default_value("auto"))("h,help", "print this help");
  return o;
}

struct Setup {
  RunConfig cfg;
  std::string config_file, train_file;  // --config, --train-config ("" when not given)
  std::string init_from, export_hf, exchange_out;
  std::int64_t export_max_bytes = 0;
  std::optional<DType> export_dtype;  // unset: the run's dtype
  std::string tie_note;  // a tied head the --init-from checkpoint unties (warned about)
  bool resume = false, overwrite_checkpoints = false;
  std::vector<std::string> accepted_changes;  // --accept-changes
  std::vector<int> stop_signals;              // --stop-signals
  double lock_stale_s = 300;
  double peak_tflops = 0;  // --peak-tflops; 0: the device's own (common/flop_rate.h)
  app::Device device = app::Device::cpu;
  std::shared_ptr<const TokenSource> data;  // train.data, opened once for the whole run
  std::vector<std::string> env_warnings;    // the deprecated variables taken (deprecated_env.h)
};

Setup parse(const cxxopts::ParseResult& res, int world_size) {
  Setup s;
  GDN_CHECK(res.count("config") || res.count("init-from"),
            "--config FILE or --init-from DIR is required (see configs/)");
  s.device = app::resolve_device(res["device"].as<std::string>());
  // Zigzag is refused before anything else, with the reason.
  require_contiguous_shards(parse_load_balance(res["load-balance"].as<std::string>()),
                            "--load-balance");
  const std::string train_file =
      res.count("train-config") ? res["train-config"].as<std::string>() : "";
  s.train_file = train_file;
  if (res.count("config")) s.config_file = res["config"].as<std::string>();
  if (res.count("init-from")) s.init_from = res["init-from"].as<std::string>();
  if (res.count("export-hf")) s.export_hf = res["export-hf"].as<std::string>();
  s.export_max_bytes = std::int64_t(app::number_in_range(res["export-hf-max-mb"].as<std::string>(),
                                                         "export-hf-max-mb", 1e-3, 1e9, "MB") *
                                    1e6);
  if (res.count("export-dtype"))
    s.export_dtype = parse_run_dtype(res["export-dtype"].as<std::string>(), "--export-dtype");
  if (res.count("exchange-out")) s.exchange_out = res["exchange-out"].as<std::string>();
  s.stop_signals = stop_signal::parse(res["stop-signals"].as<std::string>(), "--stop-signals");
  s.lock_stale_s = app::number_in_range(res["lock-stale-s"].as<std::string>(), "lock-stale-s", 1,
                                        1e6, "seconds");
  if (res.count("peak-tflops"))
    s.peak_tflops = app::number_in_range(res["peak-tflops"].as<std::string>(), "peak-tflops", 1e-6,
                                         1e6, "TFLOP/s");
  if (res.count("config")) {
    s.cfg = load_config(res["config"].as<std::string>(), train_file);
  }
  if (!s.init_from.empty()) {
    // The checkpoint's config.json is the model; a --config must agree with it.
    const RunConfig hf =
        load_config(s.init_from + "/config.json", res.count("config") ? "" : train_file);
    if (res.count("config")) {
      const std::vector<std::string> diff = architecture_differences(s.cfg.model, hf.model);
      std::string list;
      for (const std::string& x : diff) list += (list.empty() ? "" : "; ") + x;
      GDN_CHECK(diff.empty(), "--config ", s.cfg.source, " and --init-from ", s.init_from,
                "/config.json describe different models (config vs checkpoint): ", list);
      s.cfg.model = hf.model;
    } else {
      s.cfg = hf;
    }
    s.tie_note = tie_head_from_checkpoint(s.init_from, s.cfg.model);
  }
  app::apply_train_flags(res, s.cfg.train);
  app::take_deprecated_env(s.cfg.train, s.env_warnings);
  const TrainConfig& t = s.cfg.train;
  s.resume = res.count("resume") > 0;
  GDN_CHECK(!s.resume || !t.checkpoint_dir.empty(),
            "--resume needs a checkpoint directory (--checkpoint-dir or train.checkpoint_dir)");
  s.overwrite_checkpoints = res.count("overwrite-checkpoints") > 0;
  GDN_CHECK(!s.overwrite_checkpoints || !t.checkpoint_dir.empty(),
            "--overwrite-checkpoints needs a checkpoint directory (--checkpoint-dir or "
            "train.checkpoint_dir)");
  if (res.count("accept-changes")) {
    GDN_CHECK(s.resume, "--accept-changes applies to --resume, which is not given");
    s.accepted_changes = parse_accepted_changes(res["accept-changes"].as<std::string>());
  }
  GDN_CHECK(!(s.resume && s.overwrite_checkpoints),
            "--resume continues the run in the checkpoint directory and --overwrite-checkpoints "
            "deletes its checkpoints: pass one of them");
  validate_layout(s.cfg, world_size);
  // Opening the data now makes a missing, too-short or out-of-range file a set-up error;
  // the trainer and the start-up line use this source (a token file is scanned once).
  s.data = make_token_source(t.data, s.cfg.model.vocab_size, t.seed, t.seq_len);
  GDN_CHECK(
      t.documents != DocumentSplit::eos || s.data->can_count_targets(s.cfg.model.eos_token_id),
      "train.data ", t.data, t.origin("data"), " with train.documents eos", t.origin("documents"),
      " gives no counted target at all: ",
      is_indexed_dataset(t.data)
          ? std::string("every document of its index is one token long")
          : "every token is the EOS id " + std::to_string(s.cfg.model.eos_token_id) +
                " (model.eos_token_id)",
      ", so each document is a lone EOS and every target is masked: nothing to train on");
  return s;
}

// Bytes this rank may allocate where the model runs: the GPU's free memory, or the host's
// available memory shared by the ranks on this node.
std::int64_t memory_for_this_rank(app::Device device, int ranks_on_node) {
#if GDN_HAVE_CUDA
  if (device == app::Device::cuda) {
    std::size_t free_bytes = 0, total = 0;
    Cuda::memory_info(&free_bytes, &total);
    return std::int64_t(free_bytes);
  }
#endif
  (void)device;
  const std::int64_t host = available_host_memory();
  return host < 0 ? -1 : host / std::max(1, ranks_on_node);
}

// Whether an output path gets a lock: a regular file or none yet (not /dev/stdout, a FIFO).
bool lockable(const std::string& path) {
  std::error_code ec;
  return !path.empty() &&
         (!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec));
}

// Every path the run reads and writes (train/run_paths.h).
RunPaths run_paths(const Setup& s) {
  const TrainConfig& t = s.cfg.train;
  RunPaths p;
  if (!s.config_file.empty()) p.inputs.push_back({"--config", s.config_file});
  if (!s.train_file.empty()) p.inputs.push_back({"--train-config", s.train_file});
  if (!s.init_from.empty()) p.inputs.push_back({"--init-from", s.init_from});
  for (const std::string& f : data_files(t.data)) p.inputs.push_back({"--data", f});
  if (lockable(t.log)) p.outputs.push_back({"--log", t.log});
  if (lockable(s.exchange_out)) p.outputs.push_back({"--exchange-out", s.exchange_out});
  if (!s.export_hf.empty()) p.replaced.push_back({"--export-hf", s.export_hf});
  p.checkpoint_dir = t.checkpoint_dir;
  return p;
}

// Rank 0 takes the locks of every path the run writes, after checking them against
// what it reads (train/run_lock.h, train/run_paths.h).
std::unique_ptr<RunLock> lock_outputs(const Setup& s) {
  const TrainConfig& t = s.cfg.train;
  auto lock = std::make_unique<RunLock>(s.lock_stale_s);
  if (!t.checkpoint_dir.empty()) lock->take_checkpoint_dir(t.checkpoint_dir);
  const RunPaths paths = run_paths(s);
  check_run_paths(paths, s.lock_stale_s);
  if (!s.export_hf.empty()) check_export_dir(s.export_hf);  // creates it: its lock lies beside
  for (const std::vector<RunPath>* written : {&paths.replaced, &paths.outputs})
    for (const RunPath& out : *written) lock->take_output(out.path, out.flag);
  return lock;
}

// The export at the end; when it fails, the trained weights are kept in a checkpoint
// (Trainer::save_rescue) and the way to export them again is named. Collective; false
// when the export failed.
template <typename T, typename Dev>
bool export_or_rescue(const Setup& s, Trainer<T, Dev>& trainer, Communicator& world) {
  std::string failure;
  try {
    trainer.export_hf(s.export_hf, s.export_max_bytes, s.export_dtype.value_or(s.cfg.train.dtype));
    return true;
  } catch (const std::exception& e) {
    failure = e.what();  // on every rank (write_hf_export agrees)
  }
  const std::string safe = trainer.save_rescue(s.export_hf);
  if (world.rank() != 0) return false;
  spdlog::error("rank 0: {}", failure);
  if (safe.empty()) {
    spdlog::error("the trained weights could not be saved anywhere either: they are lost");
  } else {
    const std::string dir = std::filesystem::path(safe).parent_path().string();
    spdlog::error(
        "the trained weights are safe in checkpoint {}: to export them, run gdn_train again "
        "with this run's flags and --checkpoint-dir {} --resume --export-hf DIR (it trains no "
        "step, then exports)",
        safe, dir);
  }
  return false;
}

// Returns the exit code: 1 when the trainer could not be built or the run diverged (one
// message printed either way).
template <typename T, typename Dev>
int train(const Setup& s, Communicator& world, Watchdog& watchdog) {
  std::unique_ptr<Communicator> device_world;
  std::unique_ptr<Trainer<T, Dev>> trainer;
  std::unique_ptr<RunLock> lock;  // released last, after the export
  const int on_node = ranks_on_this_node(MPI_COMM_WORLD);
  app::FlopRateChoice rate;  // rank 0's: the step line is its
  // Rank 0 takes the checkpoint directory before anything is written there, and checks
  // that it can write the export after the last step (apart from the trainer's set-up,
  // which holds collectives that every rank must reach).
  if (!app::run_setup_collectively(world, [&] {
        if (world.rank() == 0) lock = lock_outputs(s);
      }))
    return 1;
  // Building the mesh and loading a checkpoint can fail too: agree before training.
  if (!app::run_setup_collectively(world, [&] {
        // Picks this rank's GPU before the model allocates anything there.
        device_world = app::make_device_world(s.device);
        if (world.rank() == 0) rate = app::model_flop_rate(s.cfg, s.device, s.peak_tflops);
        TrainerOptions opt;
        opt.rate = rate.rate;
        opt.resume = s.resume;
        opt.overwrite_checkpoints = s.overwrite_checkpoints;
        opt.watchdog = &watchdog;
        opt.memory_available = memory_for_this_rank(s.device, on_node);
        opt.init_from = s.init_from;
        opt.data = s.data;
        opt.exchange_out = s.exchange_out;
        opt.accepted_changes = s.accepted_changes;
        opt.stop_requested = [] { return stop_signal::received(); };
        opt.lock_lost = [&lock] { return lock ? lock->lost() : std::string(); };
        trainer = std::make_unique<Trainer<T, Dev>>(s.cfg, world,
                                                    device_world ? *device_world : world, opt);
      }))
    return 1;
  if (world.rank() == 0) {
    spdlog::info("memory per rank (estimate): {}", trainer->memory_estimate().describe());
    spdlog::info("layout: {}", trainer->layout().describe());
    spdlog::info(
        "model FLOPs: {:.4g} TFLOP a step (gdn_plan: forward + backward at cp 1); "
        "MFU against {}{}",
        rate.rate.flops_per_step * 1e-12,
        rate.rate.peak > 0 ? fmt::format("{:.4g} TFLOP/s per rank, ", rate.rate.peak * 1e-12)
                           : std::string(),
        rate.peak_source);
  }
  const RunResult result = trainer->run();
  if (!result.stopped.empty()) {
    // Every rank saw the same non-finite value: one message, and all exit 1 together.
    if (world.rank() == 0) spdlog::error("{}", result.stopped);
    return 1;
  }
  if (result.stop_signal) {
    const std::int64_t at = trainer->next_step();
    const std::string& dir = s.cfg.train.checkpoint_dir;
    if (world.rank() == 0)
      spdlog::warn(
          "{}: preempted at step {} of {}: {}; exiting with status {} (preempted, "
          "resumable)",
          stop_signal::name(result.stop_signal), at, s.cfg.train.steps,
          dir.empty() ? std::string("no --checkpoint-dir, so this run's steps are lost")
          : at == 0   ? std::string("no step had run, nothing to save")
                    : "checkpoint " + checkpoint_path(dir, at) + " written; continue with --resume",
          stop_signal::kPreemptedExit);
    return stop_signal::kPreemptedExit;
  }
  if (!s.export_hf.empty() && !export_or_rescue(s, *trainer, world)) return 1;
  // Each rank's CPU time in the steps: the largest and the mean over the ranks.
  double cpu_max = result.cpu_seconds, cpu_sum = result.cpu_seconds;
  world.all_reduce_max(&cpu_max, 1, app_sites::kCpuTime);
  world.all_reduce_sum(&cpu_sum, 1, app_sites::kCpuTime);
  if (world.rank() != 0 || result.steps.empty()) return 0;
  double tokens = 0, ms = 0, loss = std::numeric_limits<double>::quiet_NaN();
  for (const StepRecord& r : result.steps) {
    tokens += double(r.tokens);
    ms += r.step_ms;
    if (!r.skipped) loss = r.loss;
  }
  if (result.skipped_steps > 0)
    spdlog::warn("{} of {} steps were skipped: their batches had no counted target",
                 result.skipped_steps, result.steps.size());
  spdlog::info(
      "done: {} steps, final loss {:.6f}, {:.0f} tokens/s on {} ranks (dp={} cp={}), peak RSS of "
      "the largest rank {}, CPU time in the steps per rank: max {:.3f} s, mean {:.3f} s",
      result.steps.size(), loss, tokens / (ms / 1000.0), world.size(), s.cfg.train.dp,
      s.cfg.train.cp, format_bytes(double(result.steps.back().peak_rss)), cpu_max,
      cpu_sum / world.size());
  // The steps after the first (which builds caches and pools), or the one step there is.
  double later_ms = 0;
  int later = 0;
  for (std::size_t i = result.steps.size() > 1 ? 1 : 0; i < result.steps.size(); ++i)
    if (!result.steps[i].skipped) later_ms += result.steps[i].step_ms, ++later;
  if (later > 0 && rate.rate.peak > 0) {
    later_ms /= later;
    spdlog::info(
        "step time: measured {:.1f} ms (mean of {} step{}), {:.3g} model TFLOP/s per rank, "
        "MFU {:.1f}%; gdn_plan: the busiest rank's FLOPs at the peak take {:.1f} ms",
        later_ms, later, later > 1 ? "s" : "", rate.rate.per_rank(later_ms) * 1e-12,
        100 * rate.rate.mfu(later_ms), rate.predicted_ms);
  }
  return 0;
}

// Dispatches on dtype and device.
int run_training(const Setup& s, Communicator& world, Watchdog& watchdog) {
  const bool f64 = s.cfg.train.dtype == DType::f64;
#if GDN_HAVE_CUDA
  if (s.device == app::Device::cuda)
    return f64 ? train<double, Cuda>(s, world, watchdog) : train<float, Cuda>(s, world, watchdog);
#endif
  return f64 ? train<double, Host>(s, world, watchdog) : train<float, Host>(s, world, watchdog);
}

void announce(const Setup& s, int world_size) {
  app::report_model_keys(s.init_from.empty() ? s.cfg.source : s.init_from + "/config.json",
                         s.cfg.ignored_model_keys, s.cfg.model_notes);
  if (!s.tie_note.empty()) spdlog::warn("{}", s.tie_note);
  for (const std::string& w : s.env_warnings) spdlog::warn("{}", w);
  spdlog::info("model {}", describe(s.cfg.model));
  const TrainConfig& t = s.cfg.train;
  spdlog::info(
      "{} ranks (dp={} cp={}{}, training state {}) on {}, {}, seq_len {}, batch {}, {} steps, "
      "{}; data: {}",
      world_size, t.dp, t.cp, t.ep > 1 ? fmt::format(" ep={}", t.ep) : std::string(),
      t.shard == Sharding::none ? std::string("replicated")
                                : "sharded (" + std::string(name_of(t.shard)) + ")",
      app::device_name(s.device), dtype_name(t.dtype), t.seq_len, t.batch_size, t.steps,
      s.cfg.source, s.data->describe());
  spdlog::info("schedule: {}", describe_schedule(adamw_config(t)));
}

// --stop-signals as given on the command line (the defaults when absent or malformed:
// the flag's own check reports it later), so that set-up already honours it.
std::vector<int> early_stop_signals(int argc, char** argv, const std::vector<int>& defaults) {
  const std::string flag = "--stop-signals";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string value;
    if (a.rfind(flag + "=", 0) == 0)
      value = a.substr(flag.size() + 1);
    else if (a == flag && i + 1 < argc)
      value = argv[i + 1];
    else
      continue;
    try {
      return stop_signal::parse(value, flag.c_str());
    } catch (const std::exception&) {
      return defaults;
    }
  }
  return defaults;
}

}  // namespace

int main(int argc, char** argv) {
  // From the start, so that a signal during set-up (a long data scan, say) stops the run
  // before its first step instead of killing it; --stop-signals narrows the set later.
  const std::vector<int> defaults = stop_signal::parse("TERM,USR1", "the default stop signals");
  stop_signal::install(early_stop_signals(argc, argv, defaults));
  return app::mpi_main<Setup>(
      argc, argv, "gdn_train", make_options(), parse, [&](Communicator& world, const Setup& s) {
        // The new set first, then the defaults it leaves out: no signal meets neither.
        stop_signal::install(s.stop_signals);
        std::vector<int> dropped;
        for (int sig : defaults)
          if (std::find(s.stop_signals.begin(), s.stop_signals.end(), sig) == s.stop_signals.end())
            dropped.push_back(sig);
        stop_signal::restore_defaults(dropped);
        const std::string heartbeats =
            s.cfg.train.watchdog_s > 0 ? app::make_heartbeat_dir(world) : std::string();
        Watchdog watchdog(s.cfg.train.watchdog_s, world.rank(), world.size(), heartbeats);
        if (!app::run_setup_collectively(world, [&] { app::require_same_device(world, s.device); }))
          return 1;
        if (world.rank() == 0) announce(s, world.size());
        int rc = 0;
        app::run_or_abort_job(world, [&] { rc = run_training(s, world, watchdog); });
        return rc;
      });
}
