#include "plan/plan_input.h"

#include "core/error.h"

namespace gdn::plan {

PlanInput PlanInput::at_cp(int P) const {
  GDN_CHECK(P >= 1 && T >= P, "cp ", P, ": every context-parallel rank needs a token (seq_len ", T,
            ")");
  PlanInput p = *this;
  p.cp = P;
  return p;
}

PlanInput plan_input(const RunConfig& c) {
  const TrainConfig& t = c.train;
  validate_layout(c, t.dp * t.cp);
  PlanInput p;
  p.model = c.model;
  p.T = t.seq_len;
  p.batch = t.batch_size;
  p.grad_accum = t.grad_accum;
  p.cp = t.cp;
  p.dp = t.dp;
  p.chunk_size = t.chunk_size;
  p.elem_bytes = int(dtype_size(value_dtype(t.dtype)));  // bf16 runs hold f32 values
  p.bf16 = t.dtype == DType::bf16;
  p.recompute = t.recompute == Recompute::layer;
  p.layer_local = t.attention_load_balance == AttentionLoadBalance::layer_local;
  p.shard = t.shard;
  p.ep = t.ep;
  p.pair_scan = t.pair_scan;
  p.source = c.source;
  return p;
}

}  // namespace gdn::plan
