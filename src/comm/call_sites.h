// Every call site's name, once: the key a Communicator counts bytes under
// (comm/communicator.h), which tests assert on, gdn_train --exchange-out records and
// gdn_plan predicts (plan/exchange.h). The code that makes a call and the code that
// predicts or checks it take the name from here; a new call site is a line here.
// Per namespace, the folder that makes the calls.
#pragma once

namespace gdn {

// GDN context parallelism (src/cp: gdn_cp.cpp, pair_scan_*, conv_halo.cpp).
namespace cp_sites {
// All-gather of every rank's pair (M_r, U_r): its shard as one affine map of the entry state.
inline constexpr const char* kForwardPairs = "cp.fwd.allgather_pairs";
// All-gather of every rank's adjoint D_r = dLoss/dh_in_r, for the backward suffix scan.
inline constexpr const char* kBackwardAdjoints = "cp.bwd.allgather_adjoints";
// The forward pairs as a log-depth point-to-point scan (options.log_depth_scan).
inline constexpr const char* kForwardLogScan = "cp.fwd.log_depth_scan";
// The backward adjoints as a log-depth point-to-point scan (options.log_depth_scan).
inline constexpr const char* kBackwardLogScan = "cp.bwd.log_depth_scan";
// All-reduce of the final states, from the rank holding each sequence's last token.
inline constexpr const char* kFinalState = "cp.fwd.final_state";
// All-reduce of dh0, from the rank holding each sequence's first token.
inline constexpr const char* kInitialStateGrad = "cp.bwd.dh0";
// The conv's W - 1 rows of history, a chain from each rank to the next.
inline constexpr const char* kConvHaloForward = "cp.fwd.conv_halo";
// The gradient of those rows, the chain back from each rank to the previous one.
inline constexpr const char* kConvHaloBackward = "cp.bwd.conv_halo";
}  // namespace cp_sites

// Attention context parallelism (src/cp/attention_cp.cpp).
namespace attention_sites {
// All-gather of every rank's K, V block.
inline constexpr const char* kKvAllGather = "attn.fwd.allgather_kv";
// All-to-all of the query rows into the balanced layout (layer_local).
inline constexpr const char* kQueryToBalanced = "attn.fwd.alltoall_q";
// All-to-all of the output rows back to the contiguous shards (layer_local).
inline constexpr const char* kOutputFromBalanced = "attn.fwd.alltoall_o";
// All-to-all of the output gradient into the balanced layout (layer_local).
inline constexpr const char* kDoutToBalanced = "attn.bwd.alltoall_do";
// All-to-all of dq back to the contiguous shards (layer_local).
inline constexpr const char* kDqFromBalanced = "attn.bwd.alltoall_dq";
// Reduce-scatter of dK, dV to the rank owning each block.
inline constexpr const char* kDkvReduceScatter = "attn.bwd.reduce_scatter_dkv";
}  // namespace attention_sites

// The model (src/model).
namespace model_sites {
// All-reduce of the MoE router statistics over the batch (2 E + 1 doubles).
inline constexpr const char* kRouterStats = "model.router_stats";
// Expert parallelism (ep > 1), over each ep group: every expert's routed-row count from
// every rank (E / ep int64 to each peer), then the routed rows to their experts' ranks and
// the experts' outputs back; backward, dy to the experts and dx back.
inline constexpr const char* kExpertCounts = "moe.fwd.alltoall_counts";
inline constexpr const char* kExpertTokens = "moe.fwd.alltoall_tokens";
inline constexpr const char* kExpertOutputs = "moe.fwd.alltoall_out";
inline constexpr const char* kExpertDy = "moe.bwd.alltoall_dy";
inline constexpr const char* kExpertDx = "moe.bwd.alltoall_dx";
}  // namespace model_sites

// The trainer (src/train/trainer.cpp).
namespace train_sites {
// All-reduce of the flat gradient buffer over every rank (with ep > 1: of each run of
// units other than experts).
inline constexpr const char* kGradAllReduce = "train.grad_allreduce";
// ep > 1, train.shard none: all-reduce of each experts unit's gradients over the ranks
// holding those experts.
inline constexpr const char* kExpertGradAllReduce = "train.expert_grad_allreduce";
// ep > 1, train.shard none: the experts' part of the gradient norm and of the check of the
// updated values, summed over the ep group (two doubles).
inline constexpr const char* kExpertNorms = "train.expert_norms";
// train.shard optimizer and full: reduce-scatter of each unit's gradients, W blocks of
// ceil(n / W) elements, once per step (full: when the backward has finished the unit).
inline constexpr const char* kGradReduceScatter = "train.grad_reduce_scatter";
// train.shard optimizer: all-gather of each unit's updated values after the AdamW step.
inline constexpr const char* kParamAllGather = "train.param_allgather";
// train.shard full: all-gather of a unit's values before its forward.
inline constexpr const char* kForwardParamGather = "train.fwd.param_allgather";
// train.shard full: all-gather of a unit's values before its backward.
inline constexpr const char* kBackwardParamGather = "train.bwd.param_allgather";
// train.shard optimizer and full: all-reduce of the owned parts' sums of squares (one
// double for the gradient norm, one for the updated values).
inline constexpr const char* kShardNorms = "train.shard_norms";
// Checkpoints: each part's entry (file, size, checksum, runs) to rank 0 for the manifest,
// and the agreement of a resume on which checkpoint every rank could read.
inline constexpr const char* kCheckpointGather = "train.checkpoint_gather";
// --export-hf: each output file's tensors, every rank's elements of them to rank 0.
inline constexpr const char* kExportGather = "train.export_gather";
// At start-up: whether any rank resolved train.pair_scan auto to log_depth (one int, a max).
inline constexpr const char* kPairScanAgree = "train.pair_scan_agree";
// All-reduce of the step's loss (one double).
inline constexpr const char* kLossAllReduce = "train.loss_allreduce";
// All-reduce (max) of the peak resident memory and the device's peak buffer bytes (two
// int64).
inline constexpr const char* kMemoryAllReduce = "train.peak_rss";
// train.documents: the sum of the counted targets, before the step (one int64).
inline constexpr const char* kTargetCount = "train.target_count";
// Max and sum of the attention work per rank, and the documents of the first step, for
// the log.
inline constexpr const char* kStats = "train.stats";
// At each step boundary, outside the step: the largest stop signal any rank received
// (one int), and after the stop's checkpoint, that every part is written.
inline constexpr const char* kStopAgree = "train.stop_agree";
// Validation (train.eval_data), outside the steps: the summed cross-entropy and counted
// targets of the windows (two doubles).
inline constexpr const char* kValidationAllReduce = "train.validation";
// All-gather of every rank's counters for --exchange-out (its length first, as a max).
inline constexpr const char* kExchangeRecord = "train.exchange_record";
}  // namespace train_sites

// The tools (apps/): agreement and statistics, never part of a training step.
namespace app_sites {
// Max of a failure flag, so every rank stops when one failed during setup.
inline constexpr const char* kSetupAgree = "app.setup_agree";
// gdn_train: max and sum of the CPU time of the steps.
inline constexpr const char* kCpuTime = "app.cpu_time";
// gdn_train: whether every rank sees a GPU (max of a flag and of its negation).
inline constexpr const char* kDevice = "app.device";
// gdn_kernel: each input check's first bad element, agreed over the ranks (a max).
inline constexpr const char* kCheckValues = "app.check_values";
// gdn_kernel: the output shards, sent point-to-point to rank 0.
inline constexpr const char* kGatherOutputs = "app.gather_outputs";
// gdn_kernel: all-gather of every rank's counters for stats.json, and maxima of timings.
inline constexpr const char* kGatherStats = "app.gather_stats";
// Every MPI tool at start-up: all-gather of each rank's host, threads and CPU mask.
inline constexpr const char* kCpuShare = "app.cpu_share";
// gdn_eval: sum of the cross-entropy.
inline constexpr const char* kEvalLoss = "eval.loss";
// gdn_eval: sum of the gradients.
inline constexpr const char* kEvalGrads = "eval.grads";
// gdn_eval: max and sum of the attention work per rank, for the log.
inline constexpr const char* kEvalStats = "eval.stats";
}  // namespace app_sites

}  // namespace gdn
