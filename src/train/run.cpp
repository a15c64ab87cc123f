#include "train/run.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "comm/call_sites.h"
#include "core/error.h"
#include "core/profile.h"
#include "runtime/devices.h"

namespace gdn {

EstimateInputs estimate_inputs(const RunConfig& cfg, int elem_bytes, PairScan scan) {
  const TrainConfig& t = cfg.train;
  return {cfg.model,
          // One micro-batch's rows: what a step holds at once (train.grad_accum).
          ShardShape::largest(t.batch_size / std::max(1, t.dp) / std::max(1, t.grad_accum),
                              t.seq_len, t.cp, t.chunk_size, scan),
          elem_bytes, t.recompute == Recompute::layer, StateLayout{t.shard, t.dp * t.cp, t.ep},
          t.dtype == DType::bf16};
}

namespace {

// The pair scan of every GDN layer, train.pair_scan with auto resolved
// (model/pair_scan_choice.h), the same on every rank: log_depth when any rank needs it to fit.
PairScanChoice agreed_pair_scan(const RunConfig& cfg, int elem_bytes, std::int64_t available,
                                Communicator& world) {
  PairScanChoice c = resolve_pair_scan(
      cfg.train.pair_scan, estimate_inputs(cfg, elem_bytes, PairScan::allgather), available);
  int log_depth = c.scan == PairScan::log_depth;
  world.all_reduce_max(&log_depth, 1, train_sites::kPairScanAgree);
  if (log_depth && c.scan != PairScan::log_depth)
    c = {PairScan::log_depth, "another rank needs it to fit its memory"};
  return c;
}

// This rank's memory estimate; throws, with the numbers, when it exceeds `available`.
MemoryEstimate checked_estimate(const RunConfig& cfg, int elem_bytes, std::int64_t available,
                                PairScan scan) {
  const TrainConfig& t = cfg.train;
  const EstimateInputs in = estimate_inputs(cfg, elem_bytes, scan);
  const ShardShape& s = in.shape;
  const MemoryEstimate e =
      estimate_memory(cfg.model, s, elem_bytes, in.recompute, in.state, in.bf16);
  if (available >= 0 && e.total() > available)
    throw_error("the model does not fit: this rank needs an estimated ", e.describe(), " (", s.B,
                (s.B == 1 ? " sequence of " : " sequences of "), s.Tl, " tokens per rank, ",
                dtype_name(t.dtype), ", pair_scan ", name_of(scan), "), but only ",
                format_bytes(double(available)),
                " is available to it; use more cp ranks, a shorter seq_len, a smaller batch or "
                "train.shard optimizer or full");
  return e;
}

// The layout, its process-wide choices set.
RunLayout applied(const RunLayout& l) {
  l.apply();
  return l;
}

}  // namespace

template <typename T, typename Dev>
Run<T, Dev>::Run(const RunConfig& cfg, Communicator& world, Communicator& dev_world,
                 std::int64_t memory_available)
    : cfg_(cfg),
      pair_scan_(agreed_pair_scan(cfg, int(sizeof(T)), memory_available, world)),
      layout_(applied(resolve_layout(cfg.train, pair_scan_))),
      estimate_(checked_estimate(cfg, int(sizeof(T)), memory_available, pair_scan_.scan)),
      mesh_(make_mesh(dev_world, cfg.train.dp, cfg.train.cp, cfg.train.ep)),
      shard_(contiguous_shard(cfg.train.seq_len, cfg.train.cp, mesh_.cp_rank)),
      model_(cfg.model, cfg.train.chunk_size,
             ModelOptions{
                 cfg.train.recompute == Recompute::layer, 0, cfg.train.shard == Sharding::full,
                 ExpertSplit{cfg.train.ep, mesh_.ep_rank}, cfg.train.dtype == DType::bf16}) {
  GDN_CHECK(dev_world.size() == world.size() && dev_world.rank() == world.rank(),
            "Run: the device communicator must hold the same ranks as the world");
  ModelComms comms;
  comms.cp = mesh_.cp_comm.get();
  comms.cp_options.attention_layer_local =
      cfg.train.attention_load_balance == AttentionLoadBalance::layer_local;
  comms.cp_options.pair_scan = pair_scan_.scan;
  comms.batch = mesh_.world;
  if (mesh_.ep > 1) {
    // The routed rows move in Dev's memory, their counts in the host's.
    if constexpr (!std::is_same_v<Dev, Host>)
      host_ep_comm_ = world.split(world.rank() / mesh_.ep, mesh_.ep_rank);
    comms.expert_rows = mesh_.ep_comm.get();
    comms.expert_counts = host_ep_comm();
  }
  model_.set_comms(comms);
  state_ = make_param_state<T, Dev>(cfg.train, model_, mesh_, world, host_ep_comm());
}

template <typename T, typename Dev>
std::vector<Communicator*> Run<T, Dev>::group_comms() const {
  std::vector<Communicator*> out{mesh_.cp_comm.get()};
  for (Communicator* c : {mesh_.ep_comm.get(), mesh_.expert_comm.get(), host_ep_comm_.get()})
    if (c) out.push_back(c);
  return out;
}

template <typename T, typename Dev>
typename Model<T, Dev>::Losses Run<T, Dev>::forward_backward(
    const Batch& b, const std::function<void(const char*)>& phase) {
  std::optional<profile::Region> data_region;
  data_region.emplace("data");
  const Buffer<Dev, std::int32_t> tokens = to_device<Dev>(b.tokens.data(), b.tokens.size());
  const Buffer<Dev, std::int32_t> targets = to_device<Dev>(b.targets.data(), b.targets.size());
  data_region.reset();
  model_.params().zero_grad();
  state_->zero_grad();
  // train.grad_accum micro-batches of the rows, one after another, their gradients summed
  // (each op adds into them; sharded, into the owned parts), each scaled by the whole
  // step's count of targets. The MoE load-balancing loss is each micro-batch's own (over
  // its rows on every rank, as Megatron's), averaged.
  const int N = cfg_.train.grad_accum, rows = b.rows / N;
  const std::size_t per_row = b.rows > 0 ? b.tokens.size() / std::size_t(b.rows) : 0;
  typename Model<T, Dev>::Losses losses;
  if (phase) phase("forward and backward");
  for (int i = 0; i < N; ++i) {
    const std::optional<Documents> docs =
        b.documents ? std::optional(b.documents->slice(i * rows, rows)) : std::nullopt;
    const StepShard shard{shard_, cfg_.train.seq_len, docs ? &*docs : nullptr};
    const std::size_t at = std::size_t(i) * std::size_t(rows) * per_row;
    const auto t0 = std::chrono::steady_clock::now();
    const auto l = model_.forward_backward(shard, tokens.data() + at, targets.data() + at, rows,
                                           1.0 / double(b.global_targets), 1.0 / N);
    losses.ce_sum += l.ce_sum;
    losses.aux += l.aux / N;
    // --profile: each micro-batch's time on rank 0 (the step line gives the step's).
    if (N > 1 && cfg_.train.profile && mesh_.world->rank() == 0)
      spdlog::info(
          "  micro-batch {}/{}: {} sequences, {:.1f} ms", i + 1, N, rows,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  // Sum the gradients over every rank (dp and cp alike): replicated, by one all-reduce;
  // sharded, each rank gets its part's sums (full: done as the backward went).
  if (const char* reduce = state_->reduce_phase()) {
    if (phase) phase(reduce);
    state_->reduce_gradients();
  }
  return losses;
}

template <typename T, typename Dev>
double Run<T, Dev>::forward_loss(const Batch& b) {
  const Buffer<Dev, std::int32_t> tokens = to_device<Dev>(b.tokens.data(), b.tokens.size());
  const Buffer<Dev, std::int32_t> targets = to_device<Dev>(b.targets.data(), b.targets.size());
  const StepShard shard{shard_, cfg_.train.seq_len, b.documents ? &*b.documents : nullptr};
  return model_.forward_loss(shard, tokens.data(), targets.data(), b.rows);
}

#define GDN_INSTANTIATE(T, Dev) template class Run<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
