// The log-depth pair scan against the all-gather under real MPI ranks (ctest runs this
// with 8, oversubscribed): the loss, every gradient, the norm and the AdamW step of a
// training step are the same to 1e-12 in fp64 at cp = 2, 3, 4 and 8, at B = 1 and 3, with
// packed documents spanning ranks and ending on shard edges, recomputing, at dp 2 x cp 4,
// with train.shard full and with the experts over ep = 2 (the GDN + attention + MoE model);
// and each run took the scan it was asked for, in every GDN layer.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <set>

#include "comm/call_sites.h"
#include "comm/mpi_communicator.h"
#include "mpi/layout_run.h"

using namespace gdn;
using namespace gdn::test;

namespace {

CpOptions scan(PairScan s) {
  CpOptions o;
  o.pair_scan = s;
  return o;
}

// The first n ranks of the world (the others get a communicator of their own and skip).
struct Group {
  std::unique_ptr<Communicator> comm;
  bool in = false;
};
Group first_ranks(Communicator& world, int n) {
  const bool in = world.rank() < n;
  return {world.split(in ? 0 : 1, world.rank()), in};
}

// Rows of documents over T tokens and cp ranks: row 0 has boundaries on every shard edge
// and two tokens after it (and a one-token document at 5); row 1 one document spanning
// every rank; row 2 is one document.
Documents spanning_documents(int B, std::int64_t T, int cp) {
  std::vector<std::vector<std::int64_t>> starts(static_cast<std::size_t>(B));
  std::set<std::int64_t> row0{5, 6};
  for (int r = 1; r < cp; ++r) {
    const std::int64_t e = contiguous_shard(T, cp, r).begin;
    row0.insert(e);
    row0.insert(e + 2);
  }
  starts[0].assign(row0.begin(), row0.end());
  if (B > 1) starts[1] = {2, T - 3};
  return Documents::from_starts(starts, T);
}

// Both scans on one layout of `group`: the same step to 1e-12, and each run's cp group
// counted the scan it was asked for (layers GDN layers, rounds each way per layer).
void check_scans(Communicator& group, const ModelConfig& c, const Batch& batch, int dp, int cp,
                 Sharding shard, bool recompute, int ep, const Documents* docs) {
  const Result ag =
      run_layout(group, c, batch, dp, cp, shard, recompute, ep, scan(PairScan::allgather), docs);
  const Result ld =
      run_layout(group, c, batch, dp, cp, shard, recompute, ep, scan(PairScan::log_depth), docs);
  check_same(ld, ag, 1e-12);
  // With documents every row has a core of its own, and so a scan of its own.
  const std::int64_t gdn = c.num_hidden_layers - c.num_attention_layers();
  const std::int64_t scans = gdn * (docs ? batch.B / dp : 1);
  const std::int64_t rounds = scan_rounds(cp);
  auto calls = [](const Result& r, const char* site) {
    const auto it = r.cp_sites.find(site);
    return it == r.cp_sites.end() ? std::int64_t(0) : it->second.calls;
  };
  CHECK(calls(ag, cp_sites::kForwardPairs) == scans);
  CHECK(calls(ag, cp_sites::kBackwardAdjoints) == scans);
  CHECK(calls(ag, cp_sites::kForwardLogScan) == 0);
  CHECK(calls(ld, cp_sites::kForwardPairs) == 0);
  CHECK(calls(ld, cp_sites::kBackwardAdjoints) == 0);
  CHECK(calls(ld, cp_sites::kForwardLogScan) == scans * rounds);
  CHECK(calls(ld, cp_sites::kBackwardLogScan) == scans * rounds);
}

}  // namespace

TEST_CASE("log_depth = allgather at cp 2, 3, 4, 8 and B = 1, 3 (fp64, 1e-12)", "[scan]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  REQUIRE(world.size() == 8);
  const ModelConfig c = hybrid_moe_model();
  for (int cp : {2, 3, 4, 8}) {
    const Group g = first_ranks(world, cp);
    if (!g.in) continue;
    for (int B : {1, 3}) {
      // 45 tokens: no shard a multiple of the chunk (16) at any cp here.
      const Batch batch = make_batch(B, 45, c.vocab_size, 11);
      INFO("cp=" << cp << " B=" << B);
      check_scans(*g.comm, c, batch, 1, cp, Sharding::none, false, 1, nullptr);
    }
  }
}

TEST_CASE("log_depth = allgather with documents spanning ranks and ending on shard edges",
          "[scan][documents]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const ModelConfig c = hybrid_moe_model();
  for (int cp : {3, 8}) {
    const Group g = first_ranks(world, cp);
    if (!g.in) continue;
    const Batch batch = make_batch(3, 53, c.vocab_size, 12);
    const Documents docs = spanning_documents(3, 53, cp);
    for (bool recompute : {false, true}) {
      INFO("cp=" << cp << " recompute " << recompute);
      check_scans(*g.comm, c, batch, 1, cp, Sharding::none, recompute, 1, &docs);
    }
  }
}

TEST_CASE("log_depth = allgather at dp 2 x cp 4: recomputing, shard full, ep 2", "[scan][shard]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const ModelConfig c = hybrid_moe_model();  // 4 experts, top 2
  const Batch batch = make_batch(4, 37, c.vocab_size, 13);
  SECTION("recompute") {
    check_scans(world, c, batch, 2, 4, Sharding::none, true, 1, nullptr);
  }
  SECTION("shard full") {
    check_scans(world, c, batch, 2, 4, Sharding::full, false, 1, nullptr);
  }
  SECTION("ep 2, shard full, recompute") {
    check_scans(world, c, batch, 2, 4, Sharding::full, true, 2, nullptr);
  }
  SECTION("cp 8, ep 2, recompute") {
    check_scans(world, c, batch, 1, 8, Sharding::none, true, 2, nullptr);
  }
}
