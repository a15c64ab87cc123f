// gdn_eval: the loss and every parameter gradient of a Hugging Face checkpoint on a batch
// of tokens, with context parallelism: the parity interface against transformers.
//
//   mpirun -np P gdn_eval --init-from DIR --tokens FILE.npy [--cp P] [--dtype f32|f64|bf16]
//       [--chunk-size 64] [--attention-load-balance none|layer_local] [--grads-out DIR]
//       [--pair-scan allgather|log_depth|auto]
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
// the ranks as gdn_train does (the gradients are gathered to rank 0 for --grads-out). Shares the
// model code with gdn_train (CPU ranks).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <optional>

#include "comm/call_sites.h"
#include "comm/mpi_communicator.h"
#include "common/app_common.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/npy.h"
#include "cp/attention_cp.h"
#include "cp/documents.h"
#include "cp/gdn_cp.h"
#include "model/hf_weights.h"
#include "model/model.h"
#include "model/pair_scan_choice.h"
#include "train/mesh.h"
#include "train/replicated_state.h"
#include "train/sharded_state.h"
#include "train/state_gather.h"
#include "train/train_config.h"

using namespace gdn;

namespace {

cxxopts::Options make_options() {
  cxxopts::Options o("gdn_eval",
                     "Loss and gradients of a Hugging Face Qwen3-Next / Qwen3.5 checkpoint on a "
                     "token batch, with context parallelism over cp ranks (run under mpirun).");
  o.add_options()("init-from",
                  "checkpoint directory: config.json and model.safetensors (or "
                  "model.safetensors.index.json and its shards)",
                  cxxopts::value<std::string>())(
      "tokens", ".npy of int32 or int64 token ids [B, T + 1]", cxxopts::value<std::string>())(
      "cp", "context-parallel degree (default: every rank); dp = world size / cp",
      cxxopts::value<int>())(
      "dtype", "f32, f64, or bf16: f32 with the bf16 mixed precision of gdn_train --dtype bf16",
      cxxopts::value<std::string>()->default_value("f64"))(
      "chunk-size", "tokens per chunk of the GDN core: 16, 32, 64 or 128",
      cxxopts::value<int>()->default_value(std::to_string(kDefaultChunkSize)))(
      "attention-load-balance",
      "none | layer_local: each rank takes attention stripes r and 2P - 1 - r of the sequence",
      cxxopts::value<std::string>()->default_value("none"))(
      "pair-scan",
      "allgather | log_depth | auto: how GDN layers scan their pairs across the cp group, as "
      "gdn_train --pair-scan (auto: the faster on one node's link)",
      cxxopts::value<std::string>()->default_value("auto"))(
      "grads-out", "write d total / d parameter for every checkpoint tensor as DIR/<name>.npy",
      cxxopts::value<std::string>())(
      "stats", "log the bytes each call site exchanged and the attention work per rank")(
      "ep", "expert-parallel degree: the experts of every MoE layer over ep consecutive ranks",
      cxxopts::value<int>()->default_value("1"))(
      "shard", "none | optimizer | full: the parameters' training state sharded over the ranks",
      cxxopts::value<std::string>()->default_value("none"))(
      "documents",
      "none | eos: packed documents ending after the config's eos_token_id (as gdn_train "
      "--documents); the target after a document's last token is not counted",
      cxxopts::value<std::string>()->default_value("none"))(
      "cu-seqlens",
      "packed documents from CU.npy: 1-D int32/int64 boundaries 0 = cu[0] < ... < cu[n] = T, "
      "the same for every row (transformers' cu_seq_lens of one row)",
      cxxopts::value<std::string>())("h,help", "print this help");
  return o;
}

struct Setup {
  std::string dir, tokens_path, grads_out;
  DType dtype = DType::f32;
  int cp = 1, dp = 1, ep = 1, chunk = kDefaultChunkSize;
  Sharding shard = Sharding::none;
  bool layer_local = false, stats = false;
  PairScan pair_scan = PairScan::automatic;
  ModelConfig model;
  std::vector<std::string> ignored, notes;
  std::string tie_note;                // a tied head the checkpoint unties (warned about)
  Tensor<std::int64_t> tokens;         // [B, T + 1]
  std::optional<Documents> documents;  // of the whole batch, with --documents or --cu-seqlens
};

// The documents of every row from --documents eos or --cu-seqlens (none: nullopt).
std::optional<Documents> parse_documents(const cxxopts::ParseResult& r, const Setup& s,
                                         const std::string& config) {
  const std::string mode = r["documents"].as<std::string>();
  const std::optional<DocumentSplit> split = enum_from_name<DocumentSplit>(mode);
  GDN_CHECK(split, "--documents ", mode, ": expected ", enum_list<DocumentSplit>());
  const bool cu = r.count("cu-seqlens") > 0;
  GDN_CHECK(!(cu && *split != DocumentSplit::none),
            "--documents eos and --cu-seqlens both give document boundaries: keep one");
  const std::int64_t B = s.tokens.shape[0], T = s.tokens.shape[1] - 1;
  std::vector<std::vector<std::int64_t>> starts(static_cast<std::size_t>(B));
  if (cu) {
    const std::string path = r["cu-seqlens"].as<std::string>();
    const NpyArray a = read_npy(path);
    GDN_CHECK((a.dtype == DType::i32 || a.dtype == DType::i64) && a.shape.size() == 1,
              "--cu-seqlens ", path, " holds ", dtype_name(a.dtype), " of shape ",
              shape_str(a.shape), ": expected a 1-D int32 or int64 array of boundaries");
    const std::vector<std::int64_t> c = npy_to_tensor<std::int64_t>(a, path).data;
    GDN_CHECK(c.size() >= 2 && c.front() == 0 && c.back() == T, "--cu-seqlens ", path,
              ": expected boundaries from 0 to T = ", T, " (the tokens file's inputs per row)");
    for (auto& row : starts) row.assign(c.begin() + 1, c.end() - 1);
    try {
      return Documents::from_starts(starts, T);
    } catch (const Error& e) {
      throw_error("--cu-seqlens ", path, ": ", e.what());
    }
  }
  if (*split == DocumentSplit::none) return std::nullopt;
  GDN_CHECK(s.model.eos_token_id >= 0, "--documents eos: ", config,
            " sets no eos_token_id, the token that ends each document");
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(T));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t)
      inputs[std::size_t(t)] = std::int32_t(s.tokens.data[std::size_t(b * (T + 1) + t)]);
    starts[std::size_t(b)] = Documents::starts_after(inputs.data(), T, s.model.eos_token_id);
  }
  return Documents::from_starts(starts, T);
}

Setup parse(const cxxopts::ParseResult& r, int world_size) {
  Setup s;
  GDN_CHECK(r.count("init-from"), "--init-from DIR is required (a Hugging Face checkpoint)");
  GDN_CHECK(r.count("tokens"), "--tokens FILE.npy is required (int32 or int64 [B, T + 1])");
  s.dir = r["init-from"].as<std::string>();
  s.tokens_path = r["tokens"].as<std::string>();
  s.cp = r.count("cp") ? r["cp"].as<int>() : world_size;
  GDN_CHECK(s.cp >= 1 && world_size % s.cp == 0, "--cp ", s.cp, ": expected a divisor of the ",
            world_size, " ranks launched (dp = ranks / cp)");
  s.dp = world_size / s.cp;
  s.dtype = parse_run_dtype(r["dtype"].as<std::string>(), "--dtype");
  s.chunk = r["chunk-size"].as<int>();
  GDN_CHECK(s.chunk >= 16 && s.chunk <= 128 && (s.chunk & (s.chunk - 1)) == 0, "--chunk-size ",
            s.chunk, ": expected 16, 32, 64 or 128");
  const std::string lb = r["attention-load-balance"].as<std::string>();
  const std::optional<AttentionLoadBalance> balance = enum_from_name<AttentionLoadBalance>(lb);
  GDN_CHECK(balance, "--attention-load-balance ", lb, ": expected ",
            enum_list<AttentionLoadBalance>());
  s.layer_local = balance == AttentionLoadBalance::layer_local;
  const std::string scan = r["pair-scan"].as<std::string>();
  const std::optional<PairScan> pair_scan = enum_from_name<PairScan>(scan);
  GDN_CHECK(pair_scan, "--pair-scan ", scan, ": expected ", enum_list<PairScan>());
  s.pair_scan = *pair_scan;
  s.stats = r.count("stats") > 0;
  s.ep = r["ep"].as<int>();
  const std::string shard = r["shard"].as<std::string>();
  const std::optional<Sharding> sharding = enum_from_name<Sharding>(shard);
  GDN_CHECK(sharding, "--shard ", shard, ": expected ", enum_list<Sharding>());
  s.shard = *sharding;
  if (r.count("grads-out")) s.grads_out = r["grads-out"].as<std::string>();
  const std::string config = s.dir + "/config.json";
  s.model = parse_model_config(read_json_file(config), config, s.ignored, s.notes);
  s.tie_note = tie_head_from_checkpoint(s.dir, s.model);
  // Tokens: [B, T + 1] ids in [0, vocab_size).
  const NpyArray a = read_npy(s.tokens_path);
  GDN_CHECK(a.dtype == DType::i32 || a.dtype == DType::i64, "--tokens ", s.tokens_path, " holds ",
            dtype_name(a.dtype), ": expected int32 or int64 token ids");
  s.tokens = npy_to_tensor<std::int64_t>(a, s.tokens_path);
  // B = 0 would reach the model as an invalid GDN shape: refused here, naming the file.
  GDN_CHECK(s.tokens.shape.size() == 2 && s.tokens.shape[0] >= 1 && s.tokens.shape[1] >= 2,
            "--tokens ", s.tokens_path, " has shape ", shape_str(s.tokens.shape),
            ": expected [B, T + 1] with B >= 1 and T >= 1");
  GDN_CHECK(s.ep >= 1 && world_size % s.ep == 0, "--ep ", s.ep, ": expected a divisor of the ",
            world_size, " ranks launched");
  GDN_CHECK(s.ep == 1 || (s.model.num_moe_layers() > 0 && s.model.num_experts % s.ep == 0), "--ep ",
            s.ep, ": expected a divisor of the model's ", s.model.num_experts, " experts (", config,
            ")");
  const std::int64_t B = s.tokens.shape[0], T = s.tokens.shape[1] - 1;
  GDN_CHECK(B % s.dp == 0, "--tokens ", s.tokens_path, ": B = ", B,
            " sequences do not split over dp = ", s.dp, " groups (world ", world_size, " / cp ",
            s.cp, ")");
  GDN_CHECK(T >= s.cp, "--tokens ", s.tokens_path, ": T = ", T,
            " tokens are fewer than cp = ", s.cp, " ranks");
  for (std::int64_t i = 0; i < s.tokens.size(); ++i)
    GDN_CHECK(
        s.tokens.data[std::size_t(i)] >= 0 && s.tokens.data[std::size_t(i)] < s.model.vocab_size,
        "--tokens ", s.tokens_path, ": the id at flat index ", i, " is ",
        s.tokens.data[std::size_t(i)], ", outside [0, vocab_size ", s.model.vocab_size, ")");
  s.documents = parse_documents(r, s, config);
  return s;
}

// Returns the exit code (1: the model or checkpoint could not be set up, one message).
template <typename T>
int evaluate(const Setup& s, Communicator& world) {
  std::unique_ptr<Model<T, Host>> model;
  std::unique_ptr<ShardedState<T, Host>> state;
  Mesh mesh;
  std::vector<std::string> skipped;
  const std::vector<ParamInfo> whole = parameter_infos(s.model);  // of the checkpoint
  std::vector<T> weights;
  if (!app::run_setup_collectively(world, [&] {
        ModelOptions mo;
        mo.by_unit = s.shard == Sharding::full;
        mo.experts = {s.ep, world.rank() % s.ep};
        mo.bf16 = s.dtype == DType::bf16;
        model = std::make_unique<Model<T, Host>>(s.model, s.chunk, mo);
        weights.resize(std::size_t(whole.back().offset + whole.back().size));
        read_hf_weights(s.dir, s.model, whole, weights, skipped);
      }))
    return 1;
  mesh = make_mesh(world, s.dp, s.cp, s.ep);
  CpOptions opt;
  opt.attention_layer_local = s.layer_local;
  const ShardShape shape =
      ShardShape::largest(int(s.tokens.shape[0] / s.dp), s.tokens.shape[1] - 1, s.cp, s.chunk);
  opt.pair_scan = resolve_pair_scan(s.pair_scan, {s.model, shape, int(sizeof(T)), false,
                                                  StateLayout{s.shard, world.size(), s.ep},
                                                  s.dtype == DType::bf16})
                      .scan;
  ModelComms comms = ModelComms::single(*mesh.cp_comm, opt);
  comms.batch = &world;
  if (s.ep > 1) comms.expert_rows = comms.expert_counts = mesh.ep_comm.get();
  model->set_comms(comms);
  if (s.shard == Sharding::none) {
    model->params().set_values(local_from_global(model->params().infos(), weights));
  } else {
    state = std::make_unique<ShardedState<T, Host>>(s.shard, *model, world, world,
                                                    mesh.expert_comm.get());
    if (s.shard == Sharding::full) model->set_unit_gather(state.get());
    state->set_values(weights);
    state->zero_grad();
  }
  weights = {};
  if (world.rank() == 0 && !skipped.empty())
    spdlog::warn("{}: {} tensors skipped (not part of the text model): {}{}", s.dir, skipped.size(),
                 skipped.front(), skipped.size() > 1 ? ", ..." : "");
  const std::int64_t B = s.tokens.shape[0], Tg = s.tokens.shape[1] - 1, Bl = B / s.dp;
  StepShard cp = StepShard::contiguous(Tg, s.cp, mesh.cp_rank);
  std::optional<Documents> group_docs;  // this dp group's rows
  if (s.documents) {
    group_docs = s.documents->slice(int(mesh.dp_rank * Bl), int(Bl));
    cp.documents = &*group_docs;
  }
  const std::int64_t n = cp.shard.size();
  std::vector<std::int32_t> tokens(std::size_t(Bl * n)), targets(std::size_t(Bl * n));
  for (std::int64_t b = 0; b < Bl; ++b)
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t* row = s.tokens.ptr() + (mesh.dp_rank * Bl + b) * (Tg + 1);
      tokens[std::size_t(b * n + t)] = std::int32_t(row[cp.shard.begin + t]);
      targets[std::size_t(b * n + t)] = std::int32_t(row[cp.shard.begin + t + 1]);
    }
  // The counted targets of the whole batch: all of them, or those inside documents.
  std::int64_t counted = B * Tg;
  if (s.documents) {
    group_docs->mask_targets(cp.shard, targets.data());
    counted -= s.documents->ignored_targets();
  }
  auto& ps = model->params();
  ps.zero_grad();
  const auto losses = model->forward_backward(cp, tokens.data(), targets.data(), int(Bl),
                                              1.0 / double(std::max<std::int64_t>(counted, 1)));
  double ce = losses.ce_sum;
  world.all_reduce_sum(&ce, 1, app_sites::kEvalLoss);
  // The gradients summed over the ranks, then every rank's part of them to rank 0.
  std::vector<GlobalRun> runs;
  std::vector<T> mine;
  if (!state) {
    reduce_grads(ps, mesh);
    for (const ParamUnit& u : ps.units())
      if (u.expert ? world.rank() < s.ep : world.rank() == 0)
        for_each_global_run(ps.infos(), u.begin, u.end,
                            [&](std::int64_t at, std::int64_t g, std::int64_t n) {
                              runs.push_back({g, at, n});
                            });
    mine = ps.host_grads();
  } else {
    if (s.shard == Sharding::optimizer) state->reduce_gradients();
    for (const OwnedPart& o : state->partition().parts())
      for_each_global_run(ps.infos(), o.begin, o.begin + o.size,
                          [&](std::int64_t local, std::int64_t g, std::int64_t n) {
                            runs.push_back({g, o.at + (local - o.begin), n});
                          });
    mine = state->owned_grads();
  }
  const std::vector<T> grads =
      std::move(gather_runs<T>(world, runs, {mine.data()}, whole.back().offset + whole.back().size,
                               app_sites::kEvalGrads)[0]);
  const double loss = ce / double(std::max<std::int64_t>(counted, 1));
  const double total =
      loss + (s.model.output_router_logits ? s.model.router_aux_loss_coef * losses.aux : 0.0);
  if (s.stats) {
    // This rank's share of the attention triangle, and the exchange per call site.
    double pairs = double(model->attention_pairs()), hi = pairs, sum = pairs;
    world.all_reduce_max(&hi, 1, app_sites::kEvalStats);
    world.all_reduce_sum(&sum, 1, app_sites::kEvalStats);
    if (world.rank() == 0) {
      if (s.model.num_attention_layers() > 0)
        spdlog::info("attention work per rank (query-key pairs): max/mean = {:.4f}",
                     hi / (sum / world.size()));
      for (const auto& [site, c] : mesh.cp_comm->counters())
        spdlog::info("rank 0 {}: {} calls, {} bytes sent, {} bytes received", site, c.calls,
                     c.bytes_sent, c.bytes_received);
    }
  }
  if (world.rank() != 0) return 0;
  if (!s.grads_out.empty()) {
    std::filesystem::create_directories(s.grads_out);
    for (const HfTensorMap& m : hf_tensor_maps(s.model, whole)) {
      Tensor<T> g(m.shape);
      g.data = gather_hf(m, grads.data());
      write_npy(s.grads_out + "/" + m.name + ".npy", g);
    }
  }
  nlohmann::json line{
      {"loss", loss}, {"aux_loss", losses.aux}, {"total", total}, {"tokens", counted}};
  std::cout << line.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return app::mpi_main<Setup>(
      argc, argv, "gdn_eval", make_options(), parse, [](Communicator& world, const Setup& s) {
        if (world.rank() == 0) {
          app::report_model_keys(s.dir + "/config.json", s.ignored, s.notes);
          if (!s.tie_note.empty()) spdlog::warn("{}", s.tie_note);
        }
        int rc = 0;
        app::run_or_abort_job(world, [&] {
          rc = s.dtype == DType::f64 ? evaluate<double>(s, world) : evaluate<float>(s, world);
        });
        return rc;
      });
}
