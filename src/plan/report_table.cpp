// The plan as tables for a terminal (gdn_plan without --json).
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <ostream>

#include "core/enum_names.h"
#include "plan/plan.h"

namespace gdn::plan {

namespace {

// 67.4 M, 2.31 G, 1.20 T: FLOPs with an SI prefix.
std::string si(double x) {
  const char* units[] = {"", "K", "M", "G", "T", "P", "E"};
  int u = 0;
  while (std::abs(x) >= 1000 && u < 6) x /= 1000, ++u;
  return fmt::format("{:.3g} {}", x, units[u]);
}

std::string seconds(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

void flops_table(const Plan& p, std::ostream& out) {
  const FlopReport& f = p.flops;
  const PlanInput& in = p.in;
  out << "FLOPs (multiply-add = 2, as the kernels compute them; elementwise work left out)\n";
  out << fmt::format("  {:<24}{:>7}{:>16}{:>13}{:>13}{:>15}\n", "component", "layers",
                     "fwd/token/layer", "fwd/token", "bwd/token", "step fwd+bwd");
  for (const ComponentFlops& c : f.components) {
    if (c.step.total() == 0) continue;
    const double ft = c.step.fwd / f.tokens, bt = c.step.bwd / f.tokens;
    out << fmt::format("  {:<24}{:>7}{:>16}{:>13}{:>13}{:>15}\n", c.name, c.layers,
                       si(ft / std::max(c.layers, 1)), si(ft), si(bt), si(c.step.total()));
  }
  out << fmt::format("  {:<24}{:>7}{:>16}{:>13}{:>13}{:>15}\n", "total", "", "",
                     si(f.step.fwd / f.tokens), si(f.step.bwd / f.tokens), si(f.step.total()));
  out << fmt::format("  the same step at cp = 1: {}; cp = {} over cp = 1: {:+.3f}%\n",
                     si(f.step_cp1.total()), in.cp, 100 * f.relative_increase());
  if (in.recompute)
    out << fmt::format("  --recompute layer runs the layers' forward again: +{} per step\n",
                       si(f.replay));
  std::string ranks;
  for (std::size_t r = 0; r < f.rank.size(); ++r)
    ranks += fmt::format("{}{}", r ? ", " : "", si(f.rank[r].total() + f.rank_replay[r]));
  out << fmt::format("  per cp rank (dp group 0): {}\n", ranks);
  if (in.model.num_attention_layers() > 0)
    out << fmt::format(
        "  attention work per rank (query-key pairs), max/mean: contiguous {:.3f}, layer_local "
        "{:.3f} (this run: {})\n",
        f.contiguous.max_over_mean(), f.layer_local.max_over_mean(),
        in.layer_local ? "layer_local" : "contiguous");
}

void exchange_table(const Plan& p, std::ostream& out) {
  out << "\nExchange per rank per step (Communicator call sites; the busiest rank's bytes)\n";
  out << fmt::format("  {:<30}{:<16}{:>7}{:>8}{:>13}{:>13}\n", "site", "collective", "group",
                     "calls", "sent", "received");
  for (const SiteTraffic& t : p.traffic) {
    std::int64_t sent = 0, received = 0, calls = 0;
    for (const RankExchange& r : p.exchange) {
      const auto it = r.sites.find(t.site);
      if (it == r.sites.end()) continue;
      calls = std::max(calls, it->second.calls);
      sent = std::max(sent, it->second.bytes_sent);
      received = std::max(received, it->second.bytes_received);
    }
    out << fmt::format("  {:<30}{:<16}{:>7}{:>8}{:>13}{:>13}\n", t.site, name_of(t.kind),
                       t.world ? "world" : "cp", calls, format_bytes(double(sent)),
                       format_bytes(double(received)));
  }
  if (p.in.cp > 1 && p.in.model.num_hidden_layers > p.in.model.num_attention_layers()) {
    out << fmt::format("  GDN pair scan: {} (pair_scan {}: {})\n", name_of(p.scan.scan),
                       name_of(p.in.pair_scan), p.scan.why);
    for (const auto& [name, c] :
         {std::pair{"allgather", &p.allgather_cost}, std::pair{"log_depth", &p.log_depth_cost}})
      out << fmt::format(
          "    {:<10} per GDN layer and step: {} messages, {} received, {} FLOP, holds {} "
          "(+ {} while it runs)\n",
          name, c->messages, format_bytes(c->bytes), si(c->flops),
          format_bytes(double(c->kept) * p.in.elem_bytes),
          format_bytes(double(c->transient) * p.in.elem_bytes));
  }
  const Crossover& x = p.crossover;
  if (x.layer_forward)
    out << fmt::format(
        "  crossover at cp = {}, tokens per shard past which GDN's exchange is below "
        "attention's:\n    per layer: forward {:.0f}, forward + backward {:.0f}; whole model: "
        "forward {:.0f}, forward + backward {:.0f} (this run: {} per shard)\n",
        x.cp, *x.layer_forward, *x.layer_step, *x.model_forward, *x.model_step,
        (p.in.T + p.in.cp - 1) / p.in.cp);
}

void memory_table(const Plan& p, std::ostream& out) {
  const MemoryEstimate& m = p.memory;
  out << "\nMemory per rank (the largest shard, as gdn_train estimates it)\n";
  out << fmt::format(
      "  parameters {}, gradients {}, AdamW moments {}{} (shard {} over {} ranks, ep {})\n",
      format_bytes(m.params), format_bytes(m.grads), format_bytes(m.moments),
      m.gathered > 0 ? ", gathered units " + format_bytes(m.gathered) : "", name_of(p.in.shard),
      p.in.world(), p.in.ep);
  out << fmt::format("  activations kept: {} without recomputation, {} with --recompute layer\n",
                     format_bytes(p.memory_none.activations),
                     format_bytes(p.memory_layer.activations));
  out << fmt::format("  largest transient: {} / {}\n", format_bytes(p.memory_none.transient),
                     format_bytes(p.memory_layer.transient));
  out << fmt::format("  total (recompute {}): {}\n", p.in.recompute ? "layer" : "none",
                     format_bytes(m.total()));
  if (p.memory_budget) {
    out << fmt::format("  longest seq_len within {} per rank (batch {}, recompute {}):\n",
                       format_bytes(*p.memory_budget), p.in.batch,
                       p.in.recompute ? "layer" : "none");
    for (const Fit& f : p.fits)
      out << fmt::format("    cp {:>4}: {}\n", f.cp,
                         f.seq_len ? fmt::format("{} ({}, {})", f.seq_len,
                                                 format_bytes(f.at.total()), name_of(f.scan))
                                   : std::string("does not fit"));
    if (p.smallest) {
      const LayoutFit& s = *p.smallest;
      out << fmt::format(
          "  fewest ranks for seq_len {} (batch {}): {} (cp {}, dp {}, ep {}, shard {}, recompute "
          "{}, pair_scan {}): {} per rank\n",
          p.in.T, p.in.batch, s.world, s.cp, s.dp, s.ep, name_of(s.shard),
          s.recompute ? "layer" : "none", name_of(s.scan), format_bytes(s.at.total()));
    } else {
      out << fmt::format("  fewest ranks for seq_len {}: none up to {} fits\n", p.in.T, kMaxWorld);
    }
  }
}

void cluster_table(const Plan& p, std::ostream& out) {
  const ClusterSpec& c = *p.cluster;
  out << fmt::format(
      "\nCluster: {} x {} GPUs (nodes x GPUs per node), NVLink {} GB/s ({} us), network {} GB/s "
      "({} us) per GPU; "
      "{} GFLOP/s per rank\n",
      c.nodes, c.gpus, c.nvlink_GBps, c.nvlink_us, c.net_GBps, c.net_us, p.rank_flops_per_s / 1e9);
  const StepTime& s = *p.step;
  out << fmt::format("  this run: compute {} + communication {} = {} per step\n",
                     seconds(s.compute_s), seconds(s.comm_s), seconds(s.total_s()));
  for (const auto& [site, secs] : s.site_s)
    if (secs > 0) out << fmt::format("    {:<30}{:>12}\n", site, seconds(secs));
  out << fmt::format("  {:>6}{:>13}{:>13}{:>13}{:>14}  {:<12}{}\n", "cp", "compute", "comm", "step",
                     "tokens/s", "cp group", "pair scan");
  const double tokens = double(p.in.batch) * double(p.in.T);
  for (const StepTime& t : p.scaling)
    out << fmt::format("  {:>6}{:>13}{:>13}{:>13}{:>14.0f}  {:<12}{}\n", t.cp, seconds(t.compute_s),
                       seconds(t.comm_s), seconds(t.total_s()), tokens / t.total_s(),
                       t.cp_on_network ? "spans nodes" : "one node", name_of(t.scan));
}

}  // namespace

void print_table(const Plan& p, std::ostream& out) {
  const PlanInput& in = p.in;
  out << "gdn_plan: " << in.source << "\n" << describe(in.model) << "\n";
  out << fmt::format(
      "seq_len {}, batch {}, cp {}, dp {}, {}, chunk {}, recompute {}, attention balance {}: {} "
      "tokens per step, {} per shard\n\n",
      in.T, in.batch, in.cp, in.dp,
      in.elem_bytes == 8 ? "f64"
      : in.bf16          ? "bf16"
                         : "f32",
      in.chunk_size, in.recompute ? "layer" : "none", in.layer_local ? "layer_local" : "none",
      std::int64_t(in.batch) * in.T, (in.T + in.cp - 1) / in.cp);
  flops_table(p, out);
  exchange_table(p, out);
  memory_table(p, out);
  if (p.cluster) cluster_table(p, out);
}

}  // namespace gdn::plan
