#include "plan/exchange.h"

#include <algorithm>

#include "comm/call_sites.h"
#include "cp/shard.h"
#include "model/model.h"
#include "model/param_partition.h"
#include "plan/attention_balance.h"
#include "plan/memory_fit.h"

namespace gdn::plan {

namespace {

using i64 = std::int64_t;

// The per-layer sizes the sites move, in bytes.
struct Sizes {
  i64 pair = 0, adjoint = 0, halo = 0;  // GDN: one rank's pair and adjoint; one halo
  i64 kv = 0;                           // attention: one rank's K, V block (and dK, dV)
  i64 kv_gathered = 0;                  // the same as the all-gather sends it
  i64 qrow = 0;                         // attention: one query row of one sequence
  i64 grads = 0, router = 0;
};

Sizes sizes(const PlanInput& in) {
  const ModelConfig& c = in.model;
  const i64 B = in.local_batch(), e = in.elem_bytes, P = in.cp;
  const i64 Hv = c.linear_num_value_heads, K = c.linear_key_head_dim, V = c.linear_value_head_dim;
  const i64 Cc = 2 * i64(c.linear_num_key_heads) * K + Hv * V;
  Sizes s;
  s.pair = B * Hv * K * (K + V) * e;
  s.adjoint = B * Hv * K * V * e;
  s.halo = B * (c.linear_conv_kernel_dim - 1) * Cc * e;
  // K and V travel in bf16 in the bf16 mode (bf16 values there, cp/attention_cp.cpp).
  s.kv = B * ((in.T + P - 1) / P) * 2 * i64(c.num_key_value_heads) * c.head_dim * e;
  s.kv_gathered = in.bf16 ? s.kv / e * 2 : s.kv;
  s.qrow = i64(c.num_attention_heads) * c.head_dim * e;
  s.grads = parameter_count(c) * e;
  s.router = (2 * i64(c.num_experts) + 1) * i64(sizeof(double));
  return s;
}

void add(SiteCounters& m, const std::string& site, i64 calls, i64 sent, i64 received) {
  if (calls == 0) return;
  CommCounter& c = m[site];
  c.calls += calls;
  c.bytes_sent += sent;
  c.bytes_received += received;
}

// One log-depth scan (cp/log_depth_scan.cpp) at position pos of P in scan order: a
// send_recv per round, a pair sent when a rank dist further on exists, one received when
// a rank dist back does.
struct ScanRounds {
  i64 calls = 0, sends = 0, receives = 0;
};
ScanRounds scan_rounds_at(int P, int pos) {
  ScanRounds s;
  for (i64 dist = 1; dist < P; dist *= 2) {
    const ScanStep step = scan_step(P, pos, dist);
    ++s.calls;
    s.sends += step.sends;
    s.receives += step.receives;
  }
  return s;
}

// Rows (of one sequence) that cp rank r sends to each peer when moving its shard into
// the balanced query layout, and receives from each: the inverse move swaps the two.
struct AllToAll {
  i64 to_peers = 0, from_peers = 0;
};

AllToAll to_queries(i64 T, int P, int r) {
  AllToAll a;
  const Shard mine = contiguous_shard(T, P, r);
  const std::vector<Interval> q_mine = query_intervals(T, P, r, true);
  for (int s = 0; s < P; ++s) {
    if (s == r) continue;
    const Shard theirs = contiguous_shard(T, P, s);
    for (const Interval& q : query_intervals(T, P, s, true))
      a.to_peers += overlap(q, {mine.begin, mine.end});
    for (const Interval& q : q_mine) a.from_peers += overlap(q, {theirs.begin, theirs.end});
  }
  return a;
}

// The training state's traffic (train.shard, docs/design.md §6d), per unit of parameters:
// which units a step gathers and reduces, and each one's blocks.
struct UnitTraffic {
  std::vector<std::size_t> fwd_gathers, bwd_gathers, reduces, update_gathers;
};

UnitTraffic unit_traffic(const PlanInput& in, std::size_t units) {
  UnitTraffic t;
  const bool tied = in.model.tie_word_embeddings;
  for (std::size_t u = 0; u < units; ++u) {
    if (in.shard == Sharding::optimizer) {
      t.reduces.push_back(u);
      t.update_gathers.push_back(u);
    } else if (in.shard == Sharding::full) {
      // Each unit for its forward; each layer again for its backward, and the embedding
      // for a tied LM head; the embedding's gradients are reduced after the head's backward
      // (tied) and after its own.
      t.fwd_gathers.push_back(u);
      if (u > 0 && u + 1 < units) t.bwd_gathers.push_back(u);
      t.reduces.push_back(u);
    }
  }
  if (in.shard == Sharding::full && tied) {
    t.bwd_gathers.push_back(0);
    t.reduces.push_back(0);
  }
  return t;
}

// The training state's sites of world rank w.
void add_state_sites(SiteCounters& m, const PlanInput& in, int w, i64 grads) {
  const std::vector<ParamUnit> units = parameter_units(in.model, ExpertSplit{in.ep, w % in.ep});
  const i64 e = in.elem_bytes;
  if (in.shard == Sharding::none && in.ep == 1) {
    add(m, train_sites::kGradAllReduce, 1, grads, grads);
    return;
  }
  if (in.shard == Sharding::none) {
    // One all-reduce per run of units of one kind; the experts' part of the two norms.
    for (std::size_t u = 0; u < units.size();) {
      std::size_t v = u;
      while (v < units.size() && units[v].expert == units[u].expert) ++v;
      const i64 bytes = (units[v - 1].end - units[u].begin) * e;
      add(m, units[u].expert ? train_sites::kExpertGradAllReduce : train_sites::kGradAllReduce, 1,
          bytes, bytes);
      u = v;
    }
    add(m, train_sites::kExpertNorms, 2, 2 * i64(sizeof(double)), 2 * i64(sizeof(double)));
    return;
  }
  const ParamPartition part(units, in.world(), w, in.world() / in.ep, w / in.ep);
  const UnitTraffic t = unit_traffic(in, units.size());
  auto gathers = [&](const char* site, const std::vector<std::size_t>& list) {
    i64 sent = 0, received = 0;
    for (std::size_t u : list) sent += part.part(u).size * e, received += units[u].size() * e;
    add(m, site, i64(list.size()), sent, received);
  };
  gathers(train_sites::kForwardParamGather, t.fwd_gathers);
  gathers(train_sites::kBackwardParamGather, t.bwd_gathers);
  gathers(train_sites::kParamAllGather, t.update_gathers);
  i64 sent = 0, received = 0;
  for (std::size_t u : t.reduces)
    sent += part.group_size(u) * part.part(u).block * e, received += part.part(u).block * e;
  add(m, train_sites::kGradReduceScatter, i64(t.reduces.size()), sent, received);
  // The gradient norm and the check of the updated values: one double each.
  add(m, train_sites::kShardNorms, 2, 2 * i64(sizeof(double)), 2 * i64(sizeof(double)));
}

// The routed rows of world rank w's tokens in one MoE layer: N k.
i64 routed_rows(const PlanInput& in, int w) {
  return i64(in.local_batch()) * contiguous_shard(in.T, in.cp, w % in.cp).size() *
         in.model.num_experts_per_tok;
}

// Expert parallelism (ep > 1), per MoE layer: the counts exactly; the routed rows as a
// balanced router would send them (each of the ep ranks gets 1 / ep of every rank's rows:
// the rows that cross are N k (ep - 1) / ep), which a real router only approaches.
void add_expert_sites(SiteCounters& m, const PlanInput& in, int w) {
  const ModelConfig& c = in.model;
  const i64 n_moe = c.num_moe_layers(), ep = in.ep;
  if (ep == 1 || n_moe == 0) return;
  const i64 fwd_times = in.recompute ? 2 : 1, e = in.elem_bytes, d = c.hidden_size;
  const i64 counts = (ep - 1) * (c.num_experts / ep) * i64(sizeof(std::int64_t));
  add(m, model_sites::kExpertCounts, n_moe * fwd_times, n_moe * fwd_times * counts,
      n_moe * fwd_times * counts);
  // Rows out of this rank, and into it from the others of its ep group.
  const i64 group = w / ep * ep;
  i64 in_rows = 0;
  for (i64 q = group; q < group + ep; ++q)
    if (q != w) in_rows += routed_rows(in, int(q));
  const i64 out_bytes = routed_rows(in, w) * (ep - 1) / ep * d * e, in_bytes = in_rows / ep * d * e;
  add(m, model_sites::kExpertTokens, n_moe * fwd_times, n_moe * fwd_times * out_bytes,
      n_moe * fwd_times * in_bytes);
  add(m, model_sites::kExpertOutputs, n_moe * fwd_times, n_moe * fwd_times * in_bytes,
      n_moe * fwd_times * out_bytes);
  add(m, model_sites::kExpertDy, n_moe, n_moe * out_bytes, n_moe * in_bytes);
  add(m, model_sites::kExpertDx, n_moe, n_moe * in_bytes, n_moe * out_bytes);
}

}  // namespace

std::vector<RankExchange> predict_exchange(const PlanInput& in) {
  const ModelConfig& c = in.model;
  const Sizes s = sizes(in);
  const int P = in.cp;
  const i64 n_attn = c.num_attention_layers(), n_gdn = c.num_hidden_layers - n_attn;
  const i64 fwd_times = in.recompute ? 2 : 1;  // the replayed forward of attention layers
  const bool log_depth = plan_scan(in).scan == PairScan::log_depth;
  std::vector<RankExchange> out;
  for (int g = 0; g < in.dp; ++g)
    for (int r = 0; r < P; ++r) {
      RankExchange x;
      x.rank = g * P + r, x.dp_rank = g, x.cp_rank = r;
      SiteCounters& m = x.sites;
      if (P > 1 && log_depth) {
        // Forward in rank order, backward in reverse rank order.
        const ScanRounds f = scan_rounds_at(P, r), b = scan_rounds_at(P, P - 1 - r);
        add(m, cp_sites::kForwardLogScan, n_gdn * f.calls, n_gdn * f.sends * s.pair,
            n_gdn * f.receives * s.pair);
        add(m, cp_sites::kBackwardLogScan, n_gdn * b.calls, n_gdn * b.sends * s.pair,
            n_gdn * b.receives * s.pair);
      } else if (P > 1) {
        add(m, cp_sites::kForwardPairs, n_gdn, n_gdn * s.pair, n_gdn * P * s.pair);
        add(m, cp_sites::kBackwardAdjoints, n_gdn, n_gdn * s.adjoint, n_gdn * P * s.adjoint);
      }
      if (P > 1) {
        // The halo chain: from the previous rank forward, from the next one backward.
        const i64 in_fwd = r > 0, out_fwd = r < P - 1;
        add(m, cp_sites::kConvHaloForward, n_gdn * (in_fwd + out_fwd), n_gdn * out_fwd * s.halo,
            n_gdn * in_fwd * s.halo);
        add(m, cp_sites::kConvHaloBackward, n_gdn * (in_fwd + out_fwd), n_gdn * in_fwd * s.halo,
            n_gdn * out_fwd * s.halo);
        const i64 na = n_attn * fwd_times;
        add(m, attention_sites::kKvAllGather, na, na * s.kv_gathered, na * P * s.kv_gathered);
        add(m, attention_sites::kDkvReduceScatter, n_attn, n_attn * P * s.kv, n_attn * s.kv);
        if (in.layer_local) {
          const AllToAll a = to_queries(in.T, P, r);
          const i64 B = in.local_batch(), to = B * a.to_peers * s.qrow,
                    from = B * a.from_peers * s.qrow;
          add(m, attention_sites::kQueryToBalanced, na, na * to, na * from);
          add(m, attention_sites::kOutputFromBalanced, na, na * from, na * to);
          add(m, attention_sites::kDoutToBalanced, n_attn, n_attn * to, n_attn * from);
          add(m, attention_sites::kDqFromBalanced, n_attn, n_attn * from, n_attn * to);
        }
      }
      if (c.num_moe_layers() > 0) add(m, model_sites::kRouterStats, 1, s.router, s.router);
      add_state_sites(m, in, x.rank, s.grads);
      add_expert_sites(m, in, x.rank);
      add(m, train_sites::kLossAllReduce, 1, sizeof(double), sizeof(double));
      add(m, train_sites::kMemoryAllReduce, 1, 2 * sizeof(std::int64_t), 2 * sizeof(std::int64_t));
      out.push_back(std::move(x));
    }
  return out;
}

std::vector<SiteTraffic> step_traffic(const PlanInput& in) {
  const ModelConfig& c = in.model;
  const Sizes s = sizes(in);
  const int P = in.cp;
  const i64 n_attn = c.num_attention_layers(), n_gdn = c.num_hidden_layers - n_attn;
  const i64 fwd_times = in.recompute ? 2 : 1;
  std::vector<SiteTraffic> t;
  auto add_site = [&](const char* site, Collective k, bool world, i64 calls, double bytes) {
    if (calls > 0) t.push_back({site, k, world, calls, bytes});
  };
  if (P > 1 && plan_scan(in).scan == PairScan::log_depth) {
    const i64 rounds = scan_rounds(P);
    add_site(cp_sites::kForwardLogScan, Collective::send_recv, false, n_gdn * rounds,
             double(s.pair));
    add_site(cp_sites::kBackwardLogScan, Collective::send_recv, false, n_gdn * rounds,
             double(s.pair));
  } else if (P > 1) {
    add_site(cp_sites::kForwardPairs, Collective::all_gather, false, n_gdn, double(s.pair));
    add_site(cp_sites::kBackwardAdjoints, Collective::all_gather, false, n_gdn, double(s.adjoint));
  }
  if (P > 1) {
    add_site(cp_sites::kConvHaloForward, Collective::chain, false, n_gdn, double(s.halo));
    add_site(cp_sites::kConvHaloBackward, Collective::chain, false, n_gdn, double(s.halo));
    add_site(attention_sites::kKvAllGather, Collective::all_gather, false, n_attn * fwd_times,
             double(s.kv_gathered));
    add_site(attention_sites::kDkvReduceScatter, Collective::reduce_scatter, false, n_attn,
             double(s.kv));
    if (in.layer_local) {
      i64 most = 0;  // the busiest rank's rows in or out
      for (int r = 0; r < P; ++r) {
        const AllToAll a = to_queries(in.T, P, r);
        most = std::max({most, a.to_peers, a.from_peers});
      }
      const double bytes = double(in.local_batch()) * double(most) * double(s.qrow);
      add_site(attention_sites::kQueryToBalanced, Collective::all_to_all, false, n_attn * fwd_times,
               bytes);
      add_site(attention_sites::kOutputFromBalanced, Collective::all_to_all, false,
               n_attn * fwd_times, bytes);
      add_site(attention_sites::kDoutToBalanced, Collective::all_to_all, false, n_attn, bytes);
      add_site(attention_sites::kDqFromBalanced, Collective::all_to_all, false, n_attn, bytes);
    }
  }
  if (c.num_moe_layers() > 0)
    add_site(model_sites::kRouterStats, Collective::all_reduce, true, 1, double(s.router));
  if (in.ep > 1 && c.num_moe_layers() > 0) {
    // The ep group's all-to-alls as a balanced router makes them (add_expert_sites).
    const i64 n_moe = c.num_moe_layers(), fwd = in.recompute ? 2 : 1;
    const double rows = double(routed_rows(in, 0)) * double(in.ep - 1) / double(in.ep);
    const double bytes = rows * c.hidden_size * in.elem_bytes;
    add_site(model_sites::kExpertCounts, Collective::all_to_all, true, n_moe * fwd,
             double((in.ep - 1) * (c.num_experts / in.ep)) * sizeof(std::int64_t));
    add_site(model_sites::kExpertTokens, Collective::all_to_all, true, n_moe * fwd, bytes);
    add_site(model_sites::kExpertOutputs, Collective::all_to_all, true, n_moe * fwd, bytes);
    add_site(model_sites::kExpertDy, Collective::all_to_all, true, n_moe, bytes);
    add_site(model_sites::kExpertDx, Collective::all_to_all, true, n_moe, bytes);
  }
  const std::vector<ParamUnit> units = parameter_units(c, ExpertSplit{in.ep, 0});
  if (in.shard == Sharding::none) {
    // The experts' runs go over world / ep ranks: priced here as one all-reduce over all.
    add_site(train_sites::kGradAllReduce, Collective::all_reduce, true, 1,
             double(units.back().end) * in.elem_bytes);
  } else {
    // Per call, the mean block over the units it moves (rank 0's blocks, the largest).
    const ParamPartition part(units, in.world(), 0, in.world() / in.ep, 0);
    const UnitTraffic u = unit_traffic(in, units.size());
    auto blocks = [&](const char* site, Collective k, const std::vector<std::size_t>& list) {
      double sum = 0;
      for (std::size_t x : list) sum += double(part.part(x).block) * in.elem_bytes;
      if (!list.empty()) add_site(site, k, true, i64(list.size()), sum / double(list.size()));
    };
    blocks(train_sites::kForwardParamGather, Collective::all_gather, u.fwd_gathers);
    blocks(train_sites::kBackwardParamGather, Collective::all_gather, u.bwd_gathers);
    blocks(train_sites::kParamAllGather, Collective::all_gather, u.update_gathers);
    blocks(train_sites::kGradReduceScatter, Collective::reduce_scatter, u.reduces);
    add_site(train_sites::kShardNorms, Collective::all_reduce, true, 2, sizeof(double));
  }
  add_site(train_sites::kLossAllReduce, Collective::all_reduce, true, 1, sizeof(double));
  add_site(train_sites::kMemoryAllReduce, Collective::all_reduce, true, 1,
           2 * sizeof(std::int64_t));
  return t;
}

}  // namespace gdn::plan
