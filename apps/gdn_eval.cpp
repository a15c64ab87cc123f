// gdn_eval: the loss and every parameter gradient of a Hugging Face checkpoint on a batch
// of tokens, with context parallelism: the parity interface against transformers.
//
//   mpirun -np P gdn_eval --init-from DIR --tokens FILE.npy [--cp P] [--dtype f32|f64|bf16]
//       [--chunk-size 64] [--attention-load-balance none|layer_local] [--grads-out DIR]
//       [--pair-scan allgather|log_depth|auto] [--device auto|cpu|cuda]
//       [--ep E] [--shard none|optimizer|full] [--documents none|eos | --cu-seqlens CU.npy]
//
// FILE.npy is int32 or int64 [B, T + 1]: inputs [:, :-1], targets [:, 1:]. Packed
// documents (cp/documents.h), as gdn_train --documents: --documents eos ends them after
// the config's eos_token_id, --cu-seqlens gives the boundaries [0, ..., T] of every row
// (1-D int32/int64); the target after a document's last token is then not counted. Prints
// one JSON line {"loss", "aux_loss", "total", "tokens"} on stdout (rank 0): loss is the
// mean cross-entropy over the counted targets ("tokens": B T without documents), aux_loss
// transformers' load-balancing loss (0 without MoE), total = loss + router_aux_loss_coef aux_loss
// when output_router_logits, else loss. --grads-out writes d total / d parameter as DIR/<checkpoint
// name>.npy in the checkpoint's layout and shape. The ranks beyond cp form data-parallel groups (dp
// = world / cp, B a multiple of dp). --ep and --shard spread the experts and the parameters over
// the ranks as gdn_train does (the gradients are gathered to rank 0 for --grads-out). It is
// gdn_train's own assembly (train/run.h: the mesh, the model, its ranks, the parameters'
// state) and batch (train/batch.h, the rows of FILE.npy as the windows), its layout flags
// gdn_train's (apps/common/train_flags.h), on the host or, with --device cuda, on GPUs.
#include <spdlog/spdlog.h>

#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <optional>

#include "comm/call_sites.h"
#include "common/app_common.h"
#include "common/deprecated_env.h"
#include "common/device_flag.h"
#include "common/train_flags.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/npy.h"
#include "model/hf_weights.h"
#include "runtime/devices.h"
#include "train/batch.h"
#include "train/run.h"
#include "train/state_gather.h"
#include "train/token_rows.h"

using namespace gdn;

namespace {

// The train fields gdn_eval takes as flags (the rest of a training run does not apply).
const std::vector<std::string> kTrainKeys = {"dtype",
                                             "cp",
                                             "ep",
                                             "chunk_size",
                                             "attention_load_balance",
                                             "pair_scan",
                                             "shard",
                                             "documents",
                                             "gemm_path",
                                             "cuda_walk",
                                             "cuda_tf32",
                                             "attention_backend"};

cxxopts::Options make_options() {
  cxxopts::Options o("gdn_eval",
                     "Loss and gradients of a Hugging Face Qwen3-Next / Qwen3.5 checkpoint on a "
                     "token batch, with context parallelism over cp ranks (run under mpirun).");
  o.add_options()("init-from",
                  "checkpoint directory: config.json and model.safetensors (or "
                  "model.safetensors.index.json and its shards)",
                  cxxopts::value<std::string>())(
      "tokens", ".npy of int32 or int64 token ids [B, T + 1]", cxxopts::value<std::string>())(
      "grads-out", "write d total / d parameter for every checkpoint tensor as DIR/<name>.npy",
      cxxopts::value<std::string>())(
      "stats", "log the bytes each call site exchanged and the attention work per rank")(
      "cu-seqlens",
      "packed documents from CU.npy: 1-D int32/int64 boundaries 0 = cu[0] < ... < cu[n] = T, "
      "the same for every row (transformers' cu_seq_lens of one row)",
      cxxopts::value<std::string>())(
      "device",
      "auto | cpu | cuda: where the model runs (as gdn_train --device); auto is cuda when this "
      "build has the CUDA path and a GPU is visible",
      cxxopts::value<std::string>()->default_value("cpu"))("h,help", "print this help");
  app::add_train_flags(o, kTrainKeys,
                       {{"dtype", "(gdn_eval's default: f64)"},
                        {"cp", "(gdn_eval's default: every rank; dp = ranks / cp)"},
                        {"documents",
                         "(or --cu-seqlens; the target after a document's last token is not "
                         "counted)"}});
  return o;
}

struct Setup {
  RunConfig cfg;  // the checkpoint's model; the layout from the flags, the batch from --tokens
  app::Device device = app::Device::cpu;
  std::string dir, tokens_path, grads_out;
  bool stats = false;
  std::string tie_note;                        // a tied head the checkpoint unties (warned about)
  std::shared_ptr<const TokenSource> windows;  // the rows of --tokens
  std::vector<std::string> env_warnings;       // the deprecated variables taken
};

// The document starts of every row from --cu-seqlens (the same for every row); nullopt
// without it.
std::optional<std::vector<std::int64_t>> cu_seqlens_starts(const cxxopts::ParseResult& r,
                                                           std::int64_t T) {
  if (!r.count("cu-seqlens")) return std::nullopt;
  const std::string path = r["cu-seqlens"].as<std::string>();
  const NpyArray a = read_npy(path);
  GDN_CHECK((a.dtype == DType::i32 || a.dtype == DType::i64) && a.shape.size() == 1,
            "--cu-seqlens ", path, " holds ", dtype_name(a.dtype), " of shape ", shape_str(a.shape),
            ": expected a 1-D int32 or int64 array of boundaries");
  const std::vector<std::int64_t> c = npy_to_tensor<std::int64_t>(a, path).data;
  GDN_CHECK(c.size() >= 2 && c.front() == 0 && c.back() == T, "--cu-seqlens ", path,
            ": expected boundaries from 0 to T = ", T, " (the tokens file's inputs per row)");
  std::vector<std::int64_t> starts(c.begin() + 1, c.end() - 1);
  try {
    Documents::from_starts({starts}, T);  // the checks, with the file's name
  } catch (const Error& e) {
    throw_error("--cu-seqlens ", path, ": ", e.what());
  }
  return starts;
}

Setup parse(const cxxopts::ParseResult& r, int world_size) {
  Setup s;
  GDN_CHECK(r.count("init-from"), "--init-from DIR is required (a Hugging Face checkpoint)");
  GDN_CHECK(r.count("tokens"), "--tokens FILE.npy is required (int32 or int64 [B, T + 1])");
  s.dir = r["init-from"].as<std::string>();
  s.tokens_path = r["tokens"].as<std::string>();
  s.device = app::resolve_device(r["device"].as<std::string>());
  s.stats = r.count("stats") > 0;
  if (r.count("grads-out")) s.grads_out = r["grads-out"].as<std::string>();
  TrainConfig& t = s.cfg.train;
  t.dtype = DType::f64;
  t.cp = world_size;
  app::apply_train_flags(r, t, kTrainKeys);
  app::take_deprecated_env(t, s.env_warnings);
  GDN_CHECK(world_size % t.cp == 0, "--cp ", t.cp, ": expected a divisor of the ", world_size,
            " ranks launched (dp = ranks / cp)");
  t.dp = world_size / t.cp;
  GDN_CHECK(t.chunk_size >= 16 && t.chunk_size <= 128 && (t.chunk_size & (t.chunk_size - 1)) == 0,
            "--chunk-size ", t.chunk_size, ": expected 16, 32, 64 or 128");
  const std::string config = s.dir + "/config.json";
  s.cfg.source = config;
  s.cfg.model = parse_model_config(read_json_file(config), config, s.cfg.ignored_model_keys,
                                   s.cfg.model_notes);
  const ModelConfig& m = s.cfg.model;
  s.tie_note = tie_head_from_checkpoint(s.dir, s.cfg.model);
  // Tokens: [B, T + 1] ids in [0, vocab_size).
  const NpyArray a = read_npy(s.tokens_path);
  GDN_CHECK(a.dtype == DType::i32 || a.dtype == DType::i64, "--tokens ", s.tokens_path, " holds ",
            dtype_name(a.dtype), ": expected int32 or int64 token ids");
  Tensor<std::int64_t> tokens = npy_to_tensor<std::int64_t>(a, s.tokens_path);
  // B = 0 would reach the model as an invalid GDN shape: refused here, naming the file.
  GDN_CHECK(tokens.shape.size() == 2 && tokens.shape[0] >= 1 && tokens.shape[1] >= 2, "--tokens ",
            s.tokens_path, " has shape ", shape_str(tokens.shape),
            ": expected [B, T + 1] with B >= 1 and T >= 1");
  GDN_CHECK(world_size % t.ep == 0, "--ep ", t.ep, ": expected a divisor of the ", world_size,
            " ranks launched");
  GDN_CHECK(t.ep == 1 || (m.num_moe_layers() > 0 && m.num_experts % t.ep == 0), "--ep ", t.ep,
            ": expected a divisor of the model's ", m.num_experts, " experts (", config, ")");
  const std::int64_t B = tokens.shape[0], T = tokens.shape[1] - 1;
  GDN_CHECK(B % t.dp == 0, "--tokens ", s.tokens_path, ": B = ", B,
            " sequences do not split over dp = ", t.dp, " groups (world ", world_size, " / cp ",
            t.cp, ")");
  GDN_CHECK(T >= t.cp, "--tokens ", s.tokens_path, ": T = ", T,
            " tokens are fewer than cp = ", t.cp, " ranks");
  for (std::int64_t i = 0; i < tokens.size(); ++i)
    GDN_CHECK(tokens.data[std::size_t(i)] >= 0 && tokens.data[std::size_t(i)] < m.vocab_size,
              "--tokens ", s.tokens_path, ": the id at flat index ", i, " is ",
              tokens.data[std::size_t(i)], ", outside [0, vocab_size ", m.vocab_size, ")");
  t.batch_size = int(B);
  t.seq_len = T;
  // Documents: after EOS (--documents eos), or where --cu-seqlens says (then documents are
  // on, their starts the rows' own, as a Megatron index gives them).
  std::optional<std::vector<std::int64_t>> starts = cu_seqlens_starts(r, T);
  GDN_CHECK(!(starts && t.documents != DocumentSplit::none),
            "--documents eos and --cu-seqlens both give document boundaries: keep one");
  if (starts) t.documents = DocumentSplit::eos;
  GDN_CHECK(starts || t.documents == DocumentSplit::none || m.eos_token_id >= 0,
            "--documents eos: ", config,
            " sets no eos_token_id, the token that ends each document");
  s.windows = token_rows(std::move(tokens), "--tokens " + s.tokens_path, std::move(starts));
  return s;
}

// Returns the exit code (1: the model or checkpoint could not be set up, one message).
template <typename T, typename Dev>
int evaluate(const Setup& s, Communicator& world) {
  const ModelConfig& m = s.cfg.model;
  std::unique_ptr<Communicator> device_world;
  std::unique_ptr<Run<T, Dev>> run;
  std::vector<std::string> skipped;
  const std::vector<ParamInfo> whole = parameter_infos(m);  // of the checkpoint
  if (!app::run_setup_collectively(world, [&] {
        device_world = app::make_device_world(s.device);
        run = std::make_unique<Run<T, Dev>>(s.cfg, world, device_world ? *device_world : world, -1);
        // Each rank reads its elements of each tensor, as gdn_train --init-from does.
        std::vector<T> mine(run->state().local_count());
        read_hf_weights(s.dir, m, whole, run->state().read_runs(), mine.data(), skipped);
        run->state().set_local_values(mine);
      }))
    return 1;
  if (world.rank() == 0) spdlog::info("layout: {}", run->layout().describe());
  if (world.rank() == 0 && !skipped.empty())
    spdlog::warn("{}: {} tensors skipped (not part of the text model): {}{}", s.dir, skipped.size(),
                 skipped.front(), skipped.size() > 1 ? ", ..." : "");
  const Batch b = next_batch(*s.windows, s.cfg.train, m.eos_token_id, run->shard(),
                             run->mesh().dp_rank, 0, world);
  const auto losses = run->forward_backward(b);
  double ce = losses.ce_sum;
  world.all_reduce_sum(&ce, 1, app_sites::kEvalLoss);
  // The gradients summed over the ranks, then every rank's part of them to rank 0.
  const std::vector<T> mine = run->state().local_grads();
  const std::vector<T> grads =
      std::move(gather_runs<T>(world, run->state().written_runs(), {mine.data()},
                               whole.back().offset + whole.back().size, app_sites::kEvalGrads)[0]);
  const std::int64_t counted = b.global_targets;
  const double loss = ce / double(std::max<std::int64_t>(counted, 1));
  const double total = loss + (m.output_router_logits ? m.router_aux_loss_coef * losses.aux : 0.0);
  if (s.stats) {
    // This rank's share of the attention triangle, and the exchange per call site.
    double pairs = double(run->model().attention_pairs()), hi = pairs, sum = pairs;
    world.all_reduce_max(&hi, 1, app_sites::kEvalStats);
    world.all_reduce_sum(&sum, 1, app_sites::kEvalStats);
    if (world.rank() == 0) {
      if (m.num_attention_layers() > 0)
        spdlog::info("attention work per rank (query-key pairs): max/mean = {:.4f}",
                     hi / (sum / world.size()));
      for (const auto& [site, c] : run->mesh().cp_comm->counters())
        spdlog::info("rank 0 {}: {} calls, {} bytes sent, {} bytes received", site, c.calls,
                     c.bytes_sent, c.bytes_received);
    }
  }
  if (world.rank() != 0) return 0;
  if (!s.grads_out.empty()) {
    std::filesystem::create_directories(s.grads_out);
    for (const HfTensorMap& map : hf_tensor_maps(m, whole)) {
      Tensor<T> g(map.shape);
      g.data = gather_hf(map, grads.data());
      write_npy(s.grads_out + "/" + map.name + ".npy", g);
    }
  }
  nlohmann::json line{
      {"loss", loss}, {"aux_loss", losses.aux}, {"total", total}, {"tokens", counted}};
  std::cout << line.dump() << std::endl;
  return 0;
}

// Dispatches on dtype and device.
int run_eval(const Setup& s, Communicator& world) {
  const bool f64 = s.cfg.train.dtype == DType::f64;
#if GDN_HAVE_CUDA
  if (s.device == app::Device::cuda)
    return f64 ? evaluate<double, Cuda>(s, world) : evaluate<float, Cuda>(s, world);
#endif
  return f64 ? evaluate<double, Host>(s, world) : evaluate<float, Host>(s, world);
}

}  // namespace

int main(int argc, char** argv) {
  return app::mpi_main<Setup>(
      argc, argv, "gdn_eval", make_options(), parse, [](Communicator& world, const Setup& s) {
        if (!app::run_setup_collectively(world, [&] { app::require_same_device(world, s.device); }))
          return 1;
        if (world.rank() == 0) {
          app::report_model_keys(s.cfg.source, s.cfg.ignored_model_keys, s.cfg.model_notes);
          if (!s.tie_note.empty()) spdlog::warn("{}", s.tie_note);
          for (const std::string& w : s.env_warnings) spdlog::warn("{}", w);
        }
        int rc = 0;
        app::run_or_abort_job(world, [&] { rc = run_eval(s, world); });
        return rc;
      });
}
