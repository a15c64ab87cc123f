// The plan as one JSON document (gdn_plan --json). Counters per rank have the layout of
// gdn_train --exchange-out ({"rank", "dp_rank", "cp_rank", "sites": {site: {"calls",
// "bytes_sent", "bytes_received"}}}), so the two compare directly.
#include <algorithm>

#include "core/enum_names.h"
#include "plan/plan.h"

namespace gdn::plan {

namespace {

using nlohmann::json;

json flops_json(const Flops& f) {
  return {{"fwd", f.fwd}, {"bwd", f.bwd}, {"total", f.total()}};
}

json memory_json(const MemoryEstimate& m) {
  return {{"params", m.params},
          {"grads", m.grads},
          {"moments", m.moments},
          {"gathered", m.gathered},
          {"activations", m.activations},
          {"transient", m.transient},
          {"total", m.total()}};
}

json optional_json(const std::optional<double>& x) {
  return x ? json(*x) : json(nullptr);
}

json step_json(const StepTime& s, const PlanInput& in) {
  json sites = json::object();
  for (const auto& [site, secs] : s.site_s) sites[site] = secs;
  const double tokens = double(in.batch) * double(in.T);
  return {{"cp", s.cp},
          {"compute_s", s.compute_s},
          {"comm_s", s.comm_s},
          {"total_s", s.total_s()},
          {"tokens_per_s", tokens / s.total_s()},
          {"cp_group_on_network", s.cp_on_network},
          {"world_on_network", s.world_on_network},
          {"pair_scan", name_of(s.scan)},
          {"sites_s", sites}};
}

}  // namespace

json to_json(const Plan& p) {
  const PlanInput& in = p.in;
  const FlopReport& f = p.flops;
  json j;
  j["config"] = in.source;
  j["model"] = describe(in.model);
  j["layout"] = {{"seq_len", in.T},
                 {"batch", in.batch},
                 {"cp", in.cp},
                 {"dp", in.dp},
                 {"dtype", in.elem_bytes == 8 ? "f64"
                           : in.bf16          ? "bf16"
                                              : "f32"},
                 {"chunk_size", in.chunk_size},
                 {"recompute", in.recompute ? "layer" : "none"},
                 {"shard", name_of(in.shard)},
                 {"ep", in.ep},
                 {"attention_load_balance", in.layer_local ? "layer_local" : "none"},
                 {"pair_scan", name_of(in.pair_scan)},
                 {"tokens_per_step", std::int64_t(in.batch) * in.T},
                 {"tokens_per_shard", (in.T + in.cp - 1) / in.cp}};

  json comps = json::array();
  for (const ComponentFlops& c : f.components) {
    const Flops per_token{c.step.fwd / f.tokens, c.step.bwd / f.tokens};
    const int layers = std::max(c.layers, 1);
    comps.push_back(
        {{"name", c.name},
         {"layers", c.layers},
         {"per_token", flops_json(per_token)},
         {"per_token_per_layer", flops_json({per_token.fwd / layers, per_token.bwd / layers})},
         {"step", flops_json(c.step)},
         {"recompute_replay", c.replay}});
  }
  json ranks = json::array();
  for (std::size_t r = 0; r < f.rank.size(); ++r)
    ranks.push_back({{"cp_rank", r},
                     {"fwd", f.rank[r].fwd},
                     {"bwd", f.rank[r].bwd},
                     {"recompute_replay", f.rank_replay[r]}});
  auto balance = [](const AttentionBalance& b) {
    return json{{"pairs", b.pairs}, {"max_over_mean", b.max_over_mean()}};
  };
  j["flops"] = {{"components", comps},
                {"per_token", flops_json({f.step.fwd / f.tokens, f.step.bwd / f.tokens})},
                {"step", flops_json(f.step)},
                {"step_cp1", flops_json(f.step_cp1)},
                {"relative_increase", f.relative_increase()},
                {"recompute_replay", f.replay},
                {"ranks", ranks},
                {"attention_balance",
                 {{"contiguous", balance(f.contiguous)}, {"layer_local", balance(f.layer_local)}}}};

  json xr = json::array();
  for (const RankExchange& r : p.exchange) {
    json sites = json::object();
    for (const auto& [site, c] : r.sites)
      sites[site] = {
          {"calls", c.calls}, {"bytes_sent", c.bytes_sent}, {"bytes_received", c.bytes_received}};
    xr.push_back(
        {{"rank", r.rank}, {"dp_rank", r.dp_rank}, {"cp_rank", r.cp_rank}, {"sites", sites}});
  }
  json traffic = json::array();
  for (const SiteTraffic& t : p.traffic)
    traffic.push_back({{"site", t.site},
                       {"collective", name_of(t.kind)},
                       {"group", t.world ? "world" : "cp"},
                       {"calls", t.calls},
                       {"bytes_per_call", t.bytes}});
  const Crossover& x = p.crossover;
  auto cost_json = [&](const ScanCost& c) {
    return json{{"messages", c.messages},
                {"bytes", c.bytes},
                {"flops", c.flops},
                {"kept_bytes", c.kept * in.elem_bytes},
                {"transient_bytes", c.transient * in.elem_bytes}};
  };
  j["exchange"] = {{"ranks", xr},
                   {"sites", traffic},
                   {"pair_scan",
                    {{"scan", name_of(p.scan.scan)},
                     {"why", p.scan.why},
                     {"per_gdn_layer_step",
                      {{"allgather", cost_json(p.allgather_cost)},
                       {"log_depth", cost_json(p.log_depth_cost)}}}}},
                   {"crossover_tokens_per_shard",
                    {{"cp", x.cp},
                     {"per_layer_forward", optional_json(x.layer_forward)},
                     {"per_layer_step", optional_json(x.layer_step)},
                     {"model_forward", optional_json(x.model_forward)},
                     {"model_step", optional_json(x.model_step)}}}};

  json mem = {{"estimate", memory_json(p.memory)},
              {"recompute_none", memory_json(p.memory_none)},
              {"recompute_layer", memory_json(p.memory_layer)}};
  if (p.memory_budget) {
    json fits = json::array();
    for (const Fit& fit : p.fits)
      fits.push_back({{"cp", fit.cp},
                      {"seq_len", fit.seq_len},
                      {"total", fit.at.total()},
                      {"pair_scan", name_of(fit.scan)}});
    mem["budget_bytes"] = *p.memory_budget;
    mem["longest_seq_len"] = fits;
    if (p.smallest) {
      const LayoutFit& s = *p.smallest;
      mem["smallest_fit"] = {{"world", s.world},
                             {"cp", s.cp},
                             {"dp", s.dp},
                             {"ep", s.ep},
                             {"shard", name_of(s.shard)},
                             {"recompute", s.recompute ? "layer" : "none"},
                             {"pair_scan", name_of(s.scan)},
                             {"total", s.at.total()}};
    } else {
      mem["smallest_fit"] = nullptr;
    }
  }
  j["memory"] = mem;

  if (p.cluster) {
    const ClusterSpec& c = *p.cluster;
    json scaling = json::array();
    for (const StepTime& s : p.scaling) scaling.push_back(step_json(s, in.at_cp(s.cp)));
    j["cluster"] = {{"nodes", c.nodes},
                    {"gpus", c.gpus},
                    {"nvlink_GBps", c.nvlink_GBps},
                    {"net_GBps", c.net_GBps},
                    {"nvlink_us", c.nvlink_us},
                    {"net_us", c.net_us},
                    {"rank_gflops", p.rank_flops_per_s / 1e9},
                    {"step", step_json(*p.step, in)},
                    {"cp_scaling", scaling}};
  }
  return j;
}

}  // namespace gdn::plan
