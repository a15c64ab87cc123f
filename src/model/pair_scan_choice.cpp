#include "model/pair_scan_choice.h"

namespace gdn {

namespace {

MemoryEstimate estimate_with(const EstimateInputs& in, PairScan scan) {
  ShardShape s = in.shape;
  s.scan = scan;
  return estimate_memory(in.model, s, in.elem_bytes, in.recompute, in.state, in.bf16);
}

}  // namespace

PairScanChoice resolve_pair_scan(PairScan asked, const EstimateInputs& in, std::int64_t available,
                                 const ScanLink& link, double flops_per_s) {
  if (asked != PairScan::automatic) return {asked, "asked for"};
  const ModelConfig& c = in.model;
  if (c.num_hidden_layers == c.num_attention_layers())
    return {PairScan::allgather, "no GDN layers"};
  PairScanChoice pick =
      faster_scan(in.shape.P, pair_dims(c, in.shape.B), in.elem_bytes, link, flops_per_s);
  if (pick.scan == PairScan::allgather && in.shape.P > 1 && available >= 0) {
    const MemoryEstimate ag = estimate_with(in, PairScan::allgather),
                         ld = estimate_with(in, PairScan::log_depth);
    if (ag.total() > available && ld.total() <= available)
      return {PairScan::log_depth,
              "the all-gathered pairs do not fit: " + format_bytes(double(ag.total())) +
                  " with them, " + format_bytes(double(ld.total())) + " without, " +
                  format_bytes(double(available)) + " available"};
  }
  return {pick.scan, std::move(pick.why)};
}

}  // namespace gdn
