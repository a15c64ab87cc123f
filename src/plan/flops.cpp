#include "plan/flops.h"

#include <algorithm>

#include "cp/shard.h"
#include "gdn/flop_count.h"

namespace gdn::plan {

namespace {

const char* const kComponents[] = {
    "gdn.projections",       "gdn.conv",       "gdn.core",   "gdn.core.cp_phase1",
    "attention.projections", "attention.core", "moe.router", "moe.experts",
    "moe.shared_expert",     "mlp.dense",      "lm_head",    "cross_entropy"};
enum Component {
  kGdnProj,
  kGdnConv,
  kGdnCore,
  kGdnCp,
  kAttnProj,
  kAttnCore,
  kRouter,
  kExperts,
  kShared,
  kDense,
  kLmHead,
  kLoss,
  kCount
};

// One rank's work, by component: forward, backward and the replayed forward.
struct RankWork {
  Flops f[kCount];
  double replay[kCount] = {};
  int layers[kCount] = {};
};

// A linear map of `macs` multiply-adds per token over n tokens: 2 FLOPs each forward, 4
// backward (dx and dW).
Flops linear(double macs, double n) {
  return {2 * macs * n, 4 * macs * n};
}

RankWork rank_work(const PlanInput& in, int P, int r, bool balanced) {
  const ModelConfig& c = in.model;
  const double d = c.hidden_size, Bl = in.local_batch();
  const Shard sh = contiguous_shard(in.T, P, r);
  const double n = Bl * double(sh.size());
  RankWork w;
  auto add = [&](Component k, Flops f, double replay, bool count_layer = true) {
    w.f[k] += f;
    w.replay[k] += replay;
    if (count_layer) ++w.layers[k];
  };
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (c.layer_type(l) == LayerType::linear_attention) {
      const double Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
      const double K = c.linear_key_head_dim, V = c.linear_value_head_dim;
      const double W = c.linear_conv_kernel_dim, Cc = 2 * Hk * K + Hv * V;
      const Flops proj = linear(d * (2 * Hk * K + 2 * Hv * V) + 2 * d * Hv + Hv * V * d, n);
      add(kGdnProj, proj, proj.fwd);
      const Flops conv = linear(W * Cc, n);
      add(kGdnConv, conv, conv.fwd);
      const ChunkFlops cf = chunk_flops(
          GdnProblem(in.local_batch(), sh.size(), int(Hk), int(Hv), int(K), int(V), in.chunk_size));
      // A replay at P > 1 starts from the kept entry state: prepare + output, no phase 1.
      add(kGdnCore, {cf.forward(), cf.backward}, cf.forward());
      if (P > 1) add(kGdnCp, {cf.transition, cf.prepare + cf.adjoint}, 0);
    } else {
      const double Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
      const Flops proj = linear(d * 2 * Hq * D + 2 * d * Hkv * D + Hq * D * d, n);
      add(kAttnProj, proj, proj.fwd);
      const double pairs = Bl * Hq * double(causal_pairs(query_intervals(in.T, P, r, balanced)));
      add(kAttnCore, {4 * D * pairs, 14 * D * pairs}, 4 * D * pairs);
    }
    if (c.is_moe_layer(l)) {
      const double E = c.num_experts, k = c.num_experts_per_tok;
      const double I = c.moe_intermediate_size, Is = c.shared_expert_intermediate_size;
      const Flops router = linear(d * E, n), experts = linear(k * 3 * d * I, n);
      const Flops shared = linear(3 * d * Is + d, n);
      add(kRouter, router, router.fwd);
      add(kExperts, experts, experts.fwd);
      add(kShared, shared, shared.fwd);
    } else {
      const Flops dense = linear(3 * d * c.intermediate_size, n);
      add(kDense, dense, dense.fwd);
    }
  }
  const double vocab = c.vocab_size;
  add(kLmHead, linear(d * vocab, n), 0);
  add(kLoss, {4 * vocab * n, 2 * vocab * n}, 0);
  return w;
}

}  // namespace

double FlopReport::max_rank_executed() const {
  double m = 0;
  for (std::size_t r = 0; r < rank.size(); ++r) m = std::max(m, rank[r].total() + rank_replay[r]);
  return m;
}

FlopReport count_flops(const PlanInput& in) {
  FlopReport rep;
  rep.tokens = double(in.batch) * double(in.T);
  rep.contiguous = attention_balance(in.T, in.cp, false);
  rep.layer_local = attention_balance(in.T, in.cp, true);
  for (int k = 0; k < kCount; ++k) rep.components.push_back({kComponents[k], 0, {}, 0});
  for (int r = 0; r < in.cp; ++r) {
    const RankWork w = rank_work(in, in.cp, r, in.layer_local);
    Flops total;
    double replay = 0;
    for (int k = 0; k < kCount; ++k) {
      ComponentFlops& c = rep.components[std::size_t(k)];
      c.layers = w.layers[k];
      c.step.fwd += in.dp * w.f[k].fwd;
      c.step.bwd += in.dp * w.f[k].bwd;
      total += w.f[k];
      if (in.recompute) {
        c.replay += in.dp * w.replay[k];
        replay += w.replay[k];
      }
    }
    rep.rank.push_back(total);
    rep.rank_replay.push_back(replay);
    rep.step.fwd += in.dp * total.fwd;
    rep.step.bwd += in.dp * total.bwd;
    rep.replay += in.dp * replay;
  }
  // The same step on one rank per sequence group (no balance to apply there).
  const RankWork one = rank_work(in.at_cp(1), 1, 0, false);
  for (int k = 0; k < kCount; ++k) {
    rep.step_cp1.fwd += in.dp * one.f[k].fwd;
    rep.step_cp1.bwd += in.dp * one.f[k].bwd;
  }
  return rep;
}

}  // namespace gdn::plan
