// The training state sharded over the world (train.shard, train/sharded_state.h) and the
// experts spread over the ranks (ep) under real MPI ranks (ctest runs this with 1, 2, 3
// and 4): at every dp x cp layout that fits, the owned gradients, gathered, are the
// replicated run's (fp64, 1e-12), the norm and the AdamW step on the owned parts give the
// replicated values, with ep = 2 and 4 as with ep = 1; and each unit moves exactly its
// blocks: W padded blocks reduce-scattered, the owned parts all-gathered.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "comm/call_sites.h"
#include "comm/mpi_communicator.h"
#include "core/json_reader.h"
#include "model/model_config.h"
#include "mpi/layout_run.h"

using namespace gdn;
using namespace gdn::test;

TEST_CASE("a sharded training state gives the replicated gradients and step (fp64, 1e-12)",
          "[shard]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int P = world.size();
  // A tied GDN model (the embedding is used by the head too) and the hybrid MoE model.
  const ModelConfig tied = make_model_config(29, 16, 2, 24, 1, 2, 8, 6, 0.2, /*tied=*/true);
  for (const ModelConfig& c : {tied, hybrid_moe_model()}) {
    const Batch batch = make_batch(2, 29, c.vocab_size, 7);
    for (int cp = 1; cp <= 4; ++cp)
      for (int dp : {1, 2}) {
        if (dp * cp != P) continue;
        for (bool recompute : {false, true}) {
          const Result ref = run_layout(world, c, batch, dp, cp, Sharding::none, recompute);
          for (Sharding shard : {Sharding::optimizer, Sharding::full}) {
            INFO("tied " << c.tie_word_embeddings << " dp=" << dp << " cp=" << cp << " shard "
                         << name_of(shard) << " recompute " << recompute);
            check_same(run_layout(world, c, batch, dp, cp, shard, recompute), ref, 1e-12);
          }
        }
      }
  }
}

TEST_CASE("experts spread over ep = 2, 4 ranks give the ep = 1 gradients and step (fp64, 1e-12)",
          "[shard][ep]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int P = world.size();
  const ModelConfig c = hybrid_moe_model();  // 4 experts, top 2
  const Batch batch = make_batch(4, 23, c.vocab_size, 7);
  int layouts = 0;
  for (int cp = 1; cp <= 4; ++cp)
    for (int dp : {1, 2, 4}) {
      if (dp * cp != P) continue;
      for (bool recompute : {false, true}) {
        const Result ref = run_layout(world, c, batch, dp, cp, Sharding::none, recompute);
        for (int ep : {2, 4})
          for (Sharding shard : {Sharding::none, Sharding::optimizer, Sharding::full}) {
            if (P % ep != 0) continue;
            ++layouts;
            INFO("dp=" << dp << " cp=" << cp << " ep=" << ep << " shard " << name_of(shard)
                       << " recompute " << recompute);
            check_same(run_layout(world, c, batch, dp, cp, shard, recompute, ep), ref, 1e-12);
          }
      }
    }
  // (dp, cp) = (1, 2), (2, 1) at 2 ranks with ep 2; (1, 4), (2, 2), (4, 1) at 4 with ep 2, 4.
  CHECK(layouts == (P == 4 ? 3 * 2 * 2 * 3 : P == 2 ? 2 * 2 * 1 * 3 : 0));
}

TEST_CASE(
    "the tiny Qwen3-Next and Qwen3.5 MoE configs: every sharding and ep gives the "
    "replicated gradients and step (fp64, 1e-12)",
    "[shard][ep]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int P = world.size();
  for (const char* name : {"tiny-qwen3-next.json", "tiny-qwen3.5.json"}) {
    const std::string path = std::string(GDN_CONFIG_DIR) + "/" + name;
    const ModelConfig c = parse_model_config(read_json_file(path).at("model"), path);
    const Batch batch = make_batch(4, 21, c.vocab_size, 3);
    for (int cp = 1; cp <= 4; ++cp)
      for (int dp : {1, 2, 4}) {
        if (dp * cp != P) continue;
        const Result ref = run_layout(world, c, batch, dp, cp, Sharding::none, false);
        for (int ep : {1, 2, 4})
          for (Sharding shard : {Sharding::none, Sharding::optimizer, Sharding::full}) {
            if (P % ep != 0 || (ep == 1 && shard == Sharding::none)) continue;
            INFO(name << " dp=" << dp << " cp=" << cp << " ep=" << ep << " shard "
                      << name_of(shard));
            check_same(run_layout(world, c, batch, dp, cp, shard, false, ep), ref, 1e-12);
          }
      }
  }
}

TEST_CASE("each unit moves exactly its blocks: W padded ones reduced, the owned ones gathered",
          "[shard][exchange]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const std::int64_t W = world.size(), e = sizeof(double);
  const ModelConfig c = make_model_config(29, 16, 2, 24, 1, 2, 8, 6, 0.2, /*tied=*/true);
  const std::vector<ParamUnit> units = parameter_units(c);
  const std::int64_t U = std::int64_t(units.size());
  REQUIRE(U == 4);  // the embedding, two layers, the final norm
  // Counted from the unit sizes alone: unit u of n elements is W blocks of ceil(n / W).
  std::int64_t padded = 0, whole = 0, mine = 0;
  for (const ParamUnit& u : units) {
    const std::int64_t block = (u.size() + W - 1) / W;
    padded += W * block;
    whole += u.size();
    mine += std::max<std::int64_t>(0, std::min(u.size(), (world.rank() + 1) * block) -
                                          std::min(u.size(), world.rank() * block));
  }
  const Batch batch = make_batch(W, 17, c.vocab_size, 7);
  auto expect = [&](const char* site, std::int64_t calls, std::int64_t sent, std::int64_t got) {
    const CommCounter& k = world.counter(site);
    INFO(site);
    CHECK(k.calls == calls);
    CHECK(k.bytes_sent == sent);
    CHECK(k.bytes_received == got);
  };
  SECTION("optimizer: every unit reduced once, gathered once after the update") {
    run_layout(world, c, batch, int(W), 1, Sharding::optimizer, false);
    expect(train_sites::kGradReduceScatter, U, padded * e, padded / W * e);
    expect(train_sites::kParamAllGather, U, mine * e, whole * e);
    expect(train_sites::kForwardParamGather, 0, 0, 0);
  }
  SECTION("full: every unit gathered for the forward; the layers and the tied embedding again") {
    run_layout(world, c, batch, int(W), 1, Sharding::full, false);
    // The embedding's gradients are reduced twice: the head's part, the embedding's part.
    const std::int64_t emb_block = (units[0].size() + W - 1) / W;
    expect(train_sites::kGradReduceScatter, U + 1, (padded + W * emb_block) * e,
           (padded / W + emb_block) * e);
    expect(train_sites::kForwardParamGather, U, mine * e, whole * e);
    const std::int64_t emb_mine =
        std::max<std::int64_t>(0, std::min(units[0].size(), (world.rank() + 1) * emb_block) -
                                      std::min(units[0].size(), world.rank() * emb_block));
    const std::int64_t layers = units[1].size() + units[2].size();
    std::int64_t layers_mine = 0;
    for (int u : {1, 2}) {
      const std::int64_t block = (units[u].size() + W - 1) / W;
      layers_mine +=
          std::max<std::int64_t>(0, std::min(units[u].size(), (world.rank() + 1) * block) -
                                        std::min(units[u].size(), world.rank() * block));
    }
    expect(train_sites::kBackwardParamGather, 3, (layers_mine + emb_mine) * e,
           (layers + units[0].size()) * e);
    expect(train_sites::kParamAllGather, 0, 0, 0);
  }
}
