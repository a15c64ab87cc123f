// gdn_train: trains a GDN language model with context parallelism, one process per rank.
//
//   mpirun -np DP*CP gdn_train --config configs/tiny.json [--cp 2] [--dp 1] [--steps N] ...
//
// Flags override the config's "train" keys. Set-up (flags, config, layout, data, resume)
// runs on every rank and the ranks agree on the outcome before training, so bad input
// gives one message and exit code 1 everywhere; a failure during training aborts the job.
#include <spdlog/spdlog.h>

#include <cxxopts.hpp>
#include <iostream>
#include <memory>

#include "app_common.h"
#include "comm/mpi_communicator.h"
#include "core/error.h"
#include "cp/shard.h"
#include "device_flag.h"
#include "train/config.h"
#include "train/data.h"
#include "train/trainer.h"
#if GDN_HAVE_CUDA
#include "comm/device_communicator.h"
#include "cuda/cuda_backend.h"
#endif

using namespace gdn;

namespace {

cxxopts::Options make_options() {
  cxxopts::Options o(
      "gdn_train",
      "Trains a Gated DeltaNet language model with context parallelism: world = dp x cp ranks,\n"
      "each cp group holds its sequences in contiguous shards in rank order. Run under mpirun\n"
      "with -np dp*cp. Flags override the same-named keys of the config's \"train\" object.");
  o.add_options()("config",
                  "JSON config with \"model\" (Hugging Face Qwen3Next key names) and "
                  "\"train\" objects",
                  cxxopts::value<std::string>())(
      "cp", "context-parallel degree: ranks sharing each sequence", cxxopts::value<int>())(
      "dp", "data-parallel degree: groups of ranks with different sequences",
      cxxopts::value<int>())("steps",
                             "optimizer steps to run in total (a resumed run stops "
                             "there too)",
                             cxxopts::value<int>())(
      "seq-len", "tokens per sequence (split over the cp ranks)", cxxopts::value<std::int64_t>())(
      "batch", "sequences per step over all dp groups (a multiple of dp)", cxxopts::value<int>())(
      "seed", "seed of the initial weights and the data: same seed, same run",
      cxxopts::value<std::uint64_t>())("dtype", "f32 or f64", cxxopts::value<std::string>())(
      "data", "'synthetic' (seeded Markov chain) or a text file (byte-level tokens)",
      cxxopts::value<std::string>())("log", "append one JSON line per step to this file",
                                     cxxopts::value<std::string>())(
      "checkpoint-dir", "directory for checkpoints (written atomically by rank 0)",
      cxxopts::value<std::string>())("checkpoint-every", "save every N steps (0: only at the end)",
                                     cxxopts::value<int>())(
      "resume", "continue from the newest complete checkpoint in the checkpoint directory")(
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
  bool resume = false;
  bool help = false;
  app::Device device = app::Device::cpu;
};

Setup parse(int argc, char** argv, int world_size) {
  auto options = make_options();
  const auto res = options.parse(argc, argv);
  Setup s;
  if (res.count("help")) {
    s.help = true;
    return s;
  }
  GDN_CHECK(res.unmatched().empty(), "unexpected argument '", res.unmatched().front(),
            "' (see --help)");
  GDN_CHECK(res.count("config"), "--config FILE is required (see configs/)");
  s.device = app::resolve_device(res["device"].as<std::string>());
  // Zigzag is refused before anything else, with the reason.
  require_contiguous_shards(parse_load_balance(res["load-balance"].as<std::string>()),
                            "--load-balance");
  s.cfg = load_config(res["config"].as<std::string>());
  TrainConfig& t = s.cfg.train;
  if (res.count("cp")) t.cp = res["cp"].as<int>();
  if (res.count("dp")) t.dp = res["dp"].as<int>();
  if (res.count("steps")) t.steps = res["steps"].as<int>();
  if (res.count("seq-len")) t.seq_len = res["seq-len"].as<std::int64_t>();
  if (res.count("batch")) t.batch_size = res["batch"].as<int>();
  if (res.count("seed")) t.seed = res["seed"].as<std::uint64_t>();
  if (res.count("dtype")) t.dtype = res["dtype"].as<std::string>();
  if (res.count("data")) t.data = res["data"].as<std::string>();
  if (res.count("log")) t.log = res["log"].as<std::string>();
  if (res.count("checkpoint-dir")) t.checkpoint_dir = res["checkpoint-dir"].as<std::string>();
  if (res.count("checkpoint-every")) t.checkpoint_every = res["checkpoint-every"].as<int>();
  GDN_CHECK(t.dtype == "f32" || t.dtype == "f64", "--dtype ", t.dtype, ": expected f32 or f64");
  GDN_CHECK(t.steps >= 0, "--steps ", t.steps, ": expected >= 0");
  s.resume = res.count("resume") > 0;
  GDN_CHECK(!s.resume || !t.checkpoint_dir.empty(),
            "--resume needs a checkpoint directory (--checkpoint-dir or train.checkpoint_dir)");
  validate_layout(s.cfg, world_size);
  // Opening the data now makes a missing or too-short file a set-up error.
  make_token_source(t.data, s.cfg.model.vocab_size, t.seed, t.seq_len);
  return s;
}

// Returns the exit code: 1 when the trainer could not be built (one message printed).
template <typename T, typename Backend>
int train(const Setup& s, Communicator& world) {
  std::unique_ptr<Communicator> device_world;
  std::unique_ptr<Trainer<T, Backend>> trainer;
  // Building the mesh and loading a checkpoint can fail too: agree before training.
  if (!app::run_setup_collectively(world, [&] {
        if constexpr (Backend::kOnDevice) {
#if GDN_HAVE_CUDA
          // Picks this rank's GPU before the model allocates anything there.
          device_world = make_device_communicator(MPI_COMM_WORLD);
#endif
        }
        trainer = std::make_unique<Trainer<T, Backend>>(s.cfg, world, s.resume, device_world.get());
      }))
    return 1;
  const std::vector<StepRecord> steps = trainer->run();
  if (world.rank() != 0 || steps.empty()) return 0;
  double tokens = 0, ms = 0;
  for (const StepRecord& r : steps) {
    tokens += double(r.tokens);
    ms += r.step_ms;
  }
  spdlog::info("done: {} steps, final loss {:.6f}, {:.0f} tokens/s on {} ranks (dp={} cp={})",
               steps.size(), steps.back().loss, tokens / (ms / 1000.0), world.size(),
               s.cfg.train.dp, s.cfg.train.cp);
  return 0;
}

// --device auto resolves on each rank: a job where only some ranks see a GPU must not
// split into CPU and GPU ranks. Collective over world.
void require_same_device(Communicator& world, app::Device d) {
  int hi = int(d), neg_lo = -int(d);
  world.all_reduce_max(&hi, 1, "app.device");
  world.all_reduce_max(&neg_lo, 1, "app.device");
  GDN_CHECK(hi == -neg_lo,
            "--device: some ranks see a GPU and some do not; pass --device cpu "
            "or run every rank where a GPU is visible");
}

// Dispatches on dtype and device.
int run_training(const Setup& s, Communicator& world) {
  const bool f64 = s.cfg.train.dtype == "f64";
#if GDN_HAVE_CUDA
  if (s.device == app::Device::cuda)
    return f64 ? train<double, CudaBackend<double>>(s, world)
               : train<float, CudaBackend<float>>(s, world);
#endif
  return f64 ? train<double, HostBackend<double>>(s, world)
             : train<float, HostBackend<float>>(s, world);
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  int rc = 0;
  {
    MpiCommunicator world;
    app::setup_logging("gdn_train");
    Setup s;
    if (!app::run_setup_collectively(world, [&] { s = parse(argc, argv, world.size()); })) {
      rc = 1;
    } else if (s.help) {
      if (world.rank() == 0) std::cout << make_options().help() << std::endl;
    } else if (!app::run_setup_collectively(world, [&] { require_same_device(world, s.device); })) {
      rc = 1;
    } else {
      if (world.rank() == 0) {
        if (!s.cfg.ignored_model_keys.empty()) {
          std::string keys;
          for (const auto& k : s.cfg.ignored_model_keys) keys += (keys.empty() ? "" : ", ") + k;
          spdlog::warn("config {}: model keys not used by gdn-cp: {}", s.cfg.source, keys);
        }
        const auto src = make_token_source(s.cfg.train.data, s.cfg.model.vocab_size,
                                           s.cfg.train.seed, s.cfg.train.seq_len);
        spdlog::info(
            "{} ranks (dp={} cp={}) on {}, {}, seq_len {}, batch {}, {} steps, {}; data: {}",
            world.size(), s.cfg.train.dp, s.cfg.train.cp, app::device_name(s.device),
            s.cfg.train.dtype, s.cfg.train.seq_len, s.cfg.train.batch_size, s.cfg.train.steps,
            s.cfg.source, src->describe());
      }
      try {
        rc = run_training(s, world);
      } catch (const std::exception& e) {
        // Past set-up another rank may wait in a collective: end the whole job.
        spdlog::error("rank {}: {}", world.rank(), e.what());
        spdlog::default_logger()->flush();
        world.abort(1);
      }
    }
  }
  return rc;
}
