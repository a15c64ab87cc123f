// gdn_plan's library (src/plan) against independent oracles: the query rows the attention
// CP really uses (cp/attention_cp.h), hand counts of FLOPs written out from the config's
// numbers, the alpha-beta formulas evaluated by hand, and the memory estimate itself at
// the edges of the fit the bisection finds.
#include <catch2/catch.hpp>

#include "comm/call_sites.h"
#include "core/json_reader.h"
#include "cp/attention_cp.h"
#include "cp/gdn_layer_core.h"
#include "ops/attention/attention.h"
#include "plan/attention_balance.h"
#include "plan/cluster.h"
#include "plan/flops.h"
#include "plan/memory_fit.h"
#include "plan/step_time.h"
#include "train/run_config.h"

using namespace gdn;
using namespace gdn::plan;
using Catch::Matchers::Contains;

namespace {

PlanInput tiny(std::int64_t T, int cp) {
  RunConfig c = load_config(GDN_SOURCE_DIR "/configs/tiny-qwen3-next.json");
  c.train.seq_len = T;
  c.train.cp = cp;
  c.train.batch_size = 2;
  return plan_input(c);
}

}  // namespace

TEST_CASE("closed-form attention work equals the positions the attention CP computes") {
  for (std::int64_t T : {1, 7, 100, 257, 1000})
    for (int P : {1, 2, 3, 4, 7})
      for (bool balanced : {false, true}) {
        if (T < P) continue;
        const AttentionBalance b = attention_balance(T, P, balanced);
        std::int64_t sum = 0;
        for (int r = 0; r < P; ++r) {
          const std::vector<std::int64_t> pos = attention_query_positions(T, P, r, balanced);
          CAPTURE(T, P, r, balanced);
          REQUIRE(b.pairs[std::size_t(r)] ==
                  ops::attention_pairs(pos.data(), std::int64_t(pos.size())));
          sum += b.pairs[std::size_t(r)];
        }
        REQUIRE(sum == T * (T + 1) / 2);  // the whole causal triangle, diagonal included
      }
  // Contiguous shards at P = 4 of a long sequence: the last rank does 7/16 of the work.
  REQUIRE(attention_balance(1 << 20, 4, false).max_over_mean() == Approx(1.75).epsilon(1e-5));
  REQUIRE(attention_balance(1 << 20, 4, true).max_over_mean() == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("forward FLOPs per token of the tiny hybrid model equal a hand count") {
  // tiny-qwen3-next: d 64, vocab 256 (tied), layers 0-2 GDN (Hk 2, K 16, Hv 4, V 16, W 4),
  // layer 3 attention (Hq 4, Hkv 2, D 16); layer 0 a dense MLP (I 128), layers 1-3 MoE
  // (E 8, top 2, I 32, shared 64). T = 128: two chunks of 64 per sequence.
  const double d = 64, T = 128, C = 64, K = 16, V = 16, Hv = 4;
  const double gdn_proj = 2 * (d * (2 * 2 * K + 2 * Hv * V) + d * 2 * Hv + Hv * V * d);
  const double conv = 2 * 4 * (2 * 2 * K + Hv * V);
  const double prepare = 3 * C * C * K + C * C * V + C * C * C / 3,
               output = 6 * C * K * V + C * C * V;
  const double core = (prepare + output) * Hv * (T / C) / T;
  const double attn_proj = 2 * (d * 2 * 4 * 16 + 2 * d * 2 * 16 + 4 * 16 * d);
  const double attn_core = 4 * 16 * 4 * (T * (T + 1) / 2) / T;
  const double moe = 2 * d * 8 + 2 * 2 * 3 * d * 32 + 2 * (3 * d * 64 + d);
  const double dense = 2 * 3 * d * 128, head = 2 * d * 256, loss = 4 * 256;
  const double hand =
      3 * (gdn_proj + conv + core) + attn_proj + attn_core + 3 * moe + dense + head + loss;
  const FlopReport f = count_flops(tiny(128, 1));
  REQUIRE(f.step.fwd / f.tokens == Approx(hand).epsilon(1e-12));
  // Backward: twice every linear map, the GDN core's own formula, 14 D Hq per attention pair,
  // 2 per logit for the loss.
  const double core_bwd = (prepare + 14 * C * K * V + 4 * C * C * V + 6 * C * C * K) * Hv / C;
  const double hand_bwd = 3 * (2 * gdn_proj + 2 * conv + core_bwd) + 2 * attn_proj +
                          attn_core * 14.0 / 4 + 3 * 2 * moe + 2 * dense + 2 * head + 2 * 256;
  REQUIRE(f.step.bwd / f.tokens == Approx(hand_bwd).epsilon(1e-12));
  REQUIRE(f.relative_increase() == 0);
}

TEST_CASE("cp adds only the GDN core's phase 1; attention work moves between ranks") {
  const FlopReport one = count_flops(tiny(256, 1)), four = count_flops(tiny(256, 4));
  double cp_phase1 = 0, attention1 = 0, attention4 = 0;
  for (std::size_t i = 0; i < four.components.size(); ++i) {
    const ComponentFlops &a = one.components[i], &b = four.components[i];
    if (b.name == "gdn.core.cp_phase1") cp_phase1 = b.step.total();
    if (b.name == "attention.core") attention1 = a.step.total(), attention4 = b.step.total();
    if (b.name != "gdn.core.cp_phase1") REQUIRE(a.step.total() == Approx(b.step.total()));
  }
  REQUIRE(attention1 == Approx(attention4));
  REQUIRE(four.step.total() - one.step.total() == Approx(cp_phase1));
  REQUIRE(cp_phase1 > 0);
}

TEST_CASE("collective costs follow the alpha-beta formulas") {
  const Link l{1e11, 1e-5, false};  // 100 GB/s, 10 us
  REQUIRE(collective_seconds(Collective::all_reduce, 8, 1e9, l) ==
          Approx(2 * 7 * 1e-5 + 2.0 * 7 / 8 * 1e9 / 1e11));
  REQUIRE(collective_seconds(Collective::all_gather, 4, 1e6, l) == Approx(3 * (1e-5 + 1e-5)));
  REQUIRE(collective_seconds(Collective::all_to_all, 4, 1e6, l) == Approx(3e-5 + 1e-5));
  REQUIRE(collective_seconds(Collective::all_gather, 1, 1e9, l) == 0);
  const ClusterSpec c = parse_cluster("nodes=2,gpus=8,nvlink_GBps=400,net_GBps=50,net_us=8");
  REQUIRE(c.ranks() == 16);
  REQUIRE_FALSE(group_link(c, 8, 2).network);  // two cp groups of 8, one per node
  REQUIRE(group_link(c, 16, 1).network);       // one group over both nodes
  REQUIRE(group_link(c, 16, 1).bytes_per_s == 50e9);
  REQUIRE(group_link(c, 16, 1).latency_s == Approx(8e-6));
  REQUIRE(group_link(c, 3, 5).network);  // ranks 6, 7, 8: the third group straddles
  REQUIRE_THROWS_WITH(parse_cluster("nodes=2,gpus=8,nvlink_GBps=400,bandwidth=3"),
                      Contains("unknown key 'bandwidth'"));
  REQUIRE_THROWS_WITH(parse_cluster("nodes=2,nvlink_GBps=400"), Contains("needs net_GBps"));
  REQUIRE_THROWS_WITH(parse_cluster("nodes=x,nvlink_GBps=1"), Contains("nodes=x"));
}

TEST_CASE("the longest seq_len that fits is the edge of the memory estimate") {
  const PlanInput in = tiny(256, 1);
  const double budget = 64.0 * 1024 * 1024;
  for (const Fit& f : longest_fits(in, budget, {1, 2, 4})) {
    CAPTURE(f.cp, f.seq_len);
    REQUIRE(f.seq_len >= f.cp);
    PlanInput p = in;
    p.cp = f.cp;
    p.T = f.seq_len;
    p.pair_scan = f.scan;
    REQUIRE(double(rank_memory(p, false).total()) <= budget);
    // One token more fits with neither scan.
    p.T = f.seq_len + 1;
    for (PairScan scan : {PairScan::allgather, PairScan::log_depth}) {
      p.pair_scan = scan;
      REQUIRE(double(rank_memory(p, false).total()) > budget);
    }
  }
}

TEST_CASE("the smallest fit fits, and no layout of half as many ranks does", "[memory]") {
  const PlanInput in = tiny(4096, 1);
  for (double budget : {1.2e7, 2.0e7, 5.0e7, 1.0e8, 3.0e8}) {
    INFO("budget " << budget);
    const std::optional<LayoutFit> f = smallest_fit(in, budget, 64);
    REQUIRE(f);
    CHECK(f->cp * f->dp == f->world);
    CHECK(double(f->at.total()) <= budget);
    PlanInput p = in;
    p.cp = f->cp, p.dp = f->dp, p.ep = f->ep, p.shard = f->shard, p.pair_scan = f->scan;
    CHECK(rank_memory(p, f->recompute).total() == f->at.total());
    // Every layout of world / 2 ranks, enumerated here: none fits.
    const int W = f->world / 2;
    for (int dp = 1; W >= 1 && dp <= W; ++dp)
      for (int ep = 1; ep <= W; ++ep)
        for (Sharding shard : {Sharding::none, Sharding::optimizer, Sharding::full})
          for (bool recompute : {false, true}) {
            if (W % dp || in.batch % dp || W % ep || in.model.num_experts % ep) continue;
            p.cp = W / dp, p.dp = dp, p.ep = ep, p.shard = shard;
            for (PairScan scan : {PairScan::allgather, PairScan::log_depth}) {
              p.pair_scan = scan;
              CHECK(double(rank_memory(p, recompute).total()) > budget);
            }
          }
  }
  CHECK_FALSE(smallest_fit(in, 1.0e3, 64));  // nothing fits a kilobyte
}

TEST_CASE("the two pair scans' costs, written out by hand", "[scan]") {
  CHECK(scan_rounds(1) == 0);
  CHECK(scan_rounds(2) == 1);
  CHECK(scan_rounds(3) == 2);
  CHECK(scan_rounds(4) == 2);
  CHECK(scan_rounds(5) == 3);
  CHECK(scan_rounds(8) == 3);
  CHECK(scan_rounds(4096) == 12);
  // The busiest rank's composing per (b, h) and direction, counted by hand from the scan's
  // loop, K = 4, V = 8: a whole composition is 2 K^3 + 2 K^2 V = 384, an offset alone 256.
  // P = 2: rank 1 the offset of one received block; P = 3: rank 2 a whole one (round 2
  // reads its map) and an offset; P = 4: rank 1 receives and sends on, whole both; P = 8:
  // rank 3 receives and sends on in rounds 1 and 2, four whole.
  CHECK(scan_compose_flops(2, 4, 8) == 256);
  CHECK(scan_compose_flops(3, 4, 8) == 384 + 256);
  CHECK(scan_compose_flops(4, 4, 8) == 2 * 384);
  CHECK(scan_compose_flops(8, 4, 8) == 4 * 384);
  // 3 (b, h) blocks of K = 4, V = 8: a pair is 3 (16 + 32) = 144 elements, D 96.
  const PairDims d{3, 4, 8};
  for (int P : {2, 3, 4, 8, 13}) {
    CAPTURE(P);
    const ScanCost ag = scan_cost(PairScan::allgather, P, d, 4),
                   ld = scan_cost(PairScan::log_depth, P, d, 4);
    const int R = P == 2 ? 1 : P <= 4 ? 2 : P == 8 ? 3 : 4;
    CHECK(ag.messages == 2 * (P - 1));
    CHECK(ag.bytes == double(P - 1) * (144 + 96) * 4);
    CHECK(ag.kept == P * 144);
    CHECK(ld.messages == 2 * R);
    CHECK(ld.bytes == 2.0 * R * 144 * 4);
    CHECK(ld.kept == 3 * 16);  // this rank's M, at every P
    CHECK(ag.flops == 2.0 * (P - 1) * 3 * 2 * 16 * 8);
    CHECK(ld.flops == 2.0 * 3 * scan_compose_flops(P, 4, 8));
  }
  CHECK(scan_cost(PairScan::log_depth, 1, d, 4).bytes == 0);
  CHECK(scan_cost(PairScan::allgather, 1, d, 4).kept == 0);
}

TEST_CASE("auto takes the faster scan, and log_depth where only it fits", "[scan]") {
  // K = V: at P = 2 the all-gather moves D (K V) back where the scan moves a pair; at P = 8
  // the scan sends 3 pairs each way against 7 pairs and 7 D's.
  const PairDims d{16, 128, 128};
  CHECK(faster_scan(1, d, 4, {}).scan == PairScan::allgather);
  CHECK(faster_scan(2, d, 4, {}).scan == PairScan::allgather);
  CHECK(faster_scan(8, d, 4, {}).scan == PairScan::log_depth);
  // Latency alone (infinite bandwidth): 2 R against 2 (P - 1) messages; a tie at P = 2.
  const ScanLink latency{1e-6, 1e30};
  CHECK(faster_scan(2, d, 4, latency).scan == PairScan::log_depth);
  CHECK(faster_scan(4, d, 4, latency).scan == PairScan::log_depth);
  // With a slow CPU composing (1 GFLOP/s), the all-gather's cheaper folding wins at P = 4.
  CHECK(faster_scan(4, d, 4, {}, 1e9).scan == PairScan::allgather);
  CHECK_THAT(faster_scan(8, d, 4, {}).why, Contains("log_depth 6 messages"));

  // The tiny model at cp 2: auto is allgather; with a budget between the two estimates, it
  // is log_depth, and the fit says so.
  PlanInput in = tiny(64, 2);
  in.pair_scan = PairScan::automatic;
  PlanInput ag = in, ld = in;
  ag.pair_scan = PairScan::allgather;
  ld.pair_scan = PairScan::log_depth;
  const double m_ag = double(rank_memory(ag, false).total()),
               m_ld = double(rank_memory(ld, false).total());
  REQUIRE(m_ld < m_ag);
  CHECK(plan_scan(in).scan == PairScan::allgather);
  CHECK(plan_scan(in, m_ag).scan == PairScan::allgather);
  const PairScanChoice tight = plan_scan(in, (m_ag + m_ld) / 2);
  CHECK(tight.scan == PairScan::log_depth);
  CHECK_THAT(tight.why, Contains("do not fit"));
  CHECK(plan_scan(in, m_ld - 1).scan == PairScan::allgather);  // neither fits: the faster
  // As asked, whatever fits.
  CHECK(plan_scan(ag, (m_ag + m_ld) / 2).scan == PairScan::allgather);
}

TEST_CASE("log_depth's pairs held per rank are flat in P, the all-gather's grow as P",
          "[scan][memory]") {
  // One GDN core's shard of 256 tokens per row, B = 2, Hv = 4, K = 16, V = 8, at P ranks.
  const GdnProblem p(2, 256, 2, 4, 16, 8, 64);
  const std::int64_t pair = 2 * 4 * 16 * (16 + 8);
  for (int P : {2, 4, 8}) {
    CAPTURE(P);
    const GdnCoreElems ld = gdn_core_elems(p, P, PairScan::log_depth, 1),
                       ag = gdn_core_elems(p, P, PairScan::allgather, 1),
                       ld2 = gdn_core_elems(p, 2 * P, PairScan::log_depth, 1),
                       ag2 = gdn_core_elems(p, 2 * P, PairScan::allgather, 1);
    CHECK(ld2.kept == ld.kept);
    CHECK(ld2.replayed == ld.replayed);
    CHECK(ag2.kept - ag.kept == P * pair);
    CHECK(ag2.replayed - ag.replayed == P * pair);
    CHECK(ag.kept - ld.kept == P * pair - 2 * 4 * 16 * 16);  // P pairs against one M
  }
}

TEST_CASE("the step time prices each pair scan: its rounds on the cp link, its composing",
          "[scan]") {
  // The tiny model at cp 4 on one node of 8 GPUs: 4 us, 10 GB/s; 1 GFLOP/s per rank.
  const ClusterSpec c = parse_cluster("nodes=1,gpus=8,nvlink_GBps=10,nvlink_us=4");
  PlanInput in = tiny(256, 4);
  const ModelConfig& m = in.model;
  const double gdn = m.num_hidden_layers - m.num_attention_layers();
  const double pair = double(in.local_batch()) * m.linear_num_value_heads * m.linear_key_head_dim *
                      (m.linear_key_head_dim + m.linear_value_head_dim) * 4;
  in.pair_scan = PairScan::allgather;
  const StepTime ag = predict_step(in, c, 1e9);
  in.pair_scan = PairScan::log_depth;
  const StepTime ld = predict_step(in, c, 1e9);
  CHECK(ag.scan == PairScan::allgather);
  CHECK(ld.scan == PairScan::log_depth);
  // Two rounds each way, a send_recv of a pair per round in every GDN layer.
  for (const char* site : {cp_sites::kForwardLogScan, cp_sites::kBackwardLogScan})
    CHECK(ld.site_s.at(site) == Approx(gdn * 2 * (4e-6 + pair / 10e9)));
  CHECK(ld.site_s.count(cp_sites::kForwardPairs) == 0);
  CHECK(ag.site_s.at(cp_sites::kForwardPairs) == Approx(gdn * 3 * (4e-6 + pair / 10e9)));
  // The composing against the folding, per GDN layer, at 1 GFLOP/s.
  const PairDims d = pair_dims(m, in.local_batch());
  CHECK(ld.compute_s - ag.compute_s == Approx(gdn *
                                              (scan_cost(PairScan::log_depth, 4, d, 4).flops -
                                               scan_cost(PairScan::allgather, 4, d, 4).flops) /
                                              1e9));
}
