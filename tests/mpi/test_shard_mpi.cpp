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
#include "cp/shard.h"
#include "model/model.h"
#include "model/model_config.h"
#include "mpi/model_batch.h"
#include "ops/adamw/adamw.h"
#include "test_support.h"
#include "train/mesh.h"
#include "train/optimizer.h"
#include "train/replicated_state.h"
#include "train/sharded_state.h"

using namespace gdn;
using namespace gdn::test;

namespace {

struct Result {
  double loss = 0, aux = 0, norm = 0;
  std::vector<double> grads;   // every parameter, flat in order, summed over the world
  std::vector<double> values;  // after one AdamW step
};

// The whole model's flat order (ep = 1) put together from every rank's runs [lo, hi) of
// its flat order, at `at` in `mine` (the runs are disjoint: a sum assembles them).
struct Piece {
  std::int64_t lo, hi, at;
};
std::vector<double> assemble(Communicator& world, const std::vector<ParamInfo>& infos,
                             std::int64_t whole_n, const std::vector<Piece>& pieces,
                             const std::vector<double>& mine) {
  std::vector<double> whole(std::size_t(whole_n), 0.0);
  for (const Piece& p : pieces)
    for_each_global_run(infos, p.lo, p.hi, [&](std::int64_t local, std::int64_t g, std::int64_t n) {
      std::copy_n(mine.begin() + p.at + (local - p.lo), n, whole.begin() + g);
    });
  world.all_reduce_sum(whole.data(), whole.size(), "test.assemble");
  return whole;
}

// One step of the whole global batch on a dp x cp mesh of world: the loss, the gradients
// summed over the world, the norm and the values after one AdamW step; replicated
// (Sharding::none) as the trainer does it, or sharded.
Result run_layout(Communicator& world, const ModelConfig& c, const Batch& batch, int dp, int cp,
                  Sharding shard, bool recompute, int ep = 1) {
  Mesh mesh = make_mesh(world, dp, cp, ep);
  ModelOptions mo;
  mo.recompute = recompute;
  mo.by_unit = shard == Sharding::full;
  mo.experts = {ep, mesh.ep_rank};
  Model<double, Host> model(c, 16, mo);
  ModelComms comms = ModelComms::single(*mesh.cp_comm);
  comms.batch = &world;
  if (ep > 1) comms.expert_rows = comms.expert_counts = mesh.ep_comm.get();
  model.set_comms(comms);
  std::unique_ptr<ShardedState<double, Host>> state;
  if (shard == Sharding::none) {
    model.init(5);
  } else {
    state = std::make_unique<ShardedState<double, Host>>(shard, model, world, world,
                                                         mesh.expert_comm.get());
    if (shard == Sharding::full) model.set_unit_gather(state.get());
    state->init(5);
    state->zero_grad();
  }
  const int Bl = batch.B / dp;
  const Shard s = contiguous_shard(batch.T, cp, mesh.cp_rank);
  const ShardTokens part = shard_tokens(batch, dp, mesh.dp_rank, s);
  const double scale = 1.0 / double(batch.B * batch.T);
  world.reset_counters();
  const auto losses =
      model.forward_backward({s, batch.T}, part.tokens.data(), part.targets.data(), Bl, scale);
  Result r;
  r.loss = losses.ce_sum * scale;
  world.all_reduce_sum(&r.loss, 1, "test.loss");
  r.aux = losses.aux;
  AdamWConfig ac;
  ac.lr = 0.01;
  ac.weight_decay = 0.1;
  ParamStore<double, Host>& ps = model.params();
  const std::int64_t whole_n = parameter_count(c);
  std::vector<Piece> pieces;  // what this rank contributes to the whole
  if (shard == Sharding::none) {
    // Rank 0 all but the experts, the first ep group the experts.
    for (const ParamUnit& u : ps.units())
      if (u.expert ? world.rank() < ep : world.rank() == 0)
        pieces.push_back({u.begin, u.end, u.begin});
    reduce_grads(ps, mesh);
    r.grads = assemble(world, ps.infos(), whole_n, pieces, ps.host_grads());
    r.norm = std::sqrt(whole_sum_squares(ps, ps.grads(), mesh, mesh.ep_comm.get()));
    if (r.norm > 0.5) ops::scale(Host{}, ps.grads(), ps.num_elements(), 0.5 / r.norm);
    AdamW<double, Host> adamw(ac, ps);
    adamw.step(ps, 0, ac.lr);
    r.values = assemble(world, ps.infos(), whole_n, pieces, ps.host_values());
    return r;
  }
  for (const OwnedPart& o : state->partition().parts())
    pieces.push_back({o.begin, o.begin + o.size, o.at});
  if (shard == Sharding::optimizer) state->reduce_gradients();
  r.grads = assemble(world, ps.infos(), whole_n, pieces, state->owned_grads());
  // Clipping folded into the update (clip_factor), against the replicated side's scaling
  // first: the same values.
  r.norm = state->grad_norm();
  state->adamw_step(ac, 0, ac.lr, clip_factor(r.norm, 0.5));
  r.values = assemble(world, ps.infos(), whole_n, pieces, state->owned_values());
  return r;
}

void check_same(const Result& r, const Result& ref, double tol) {
  CHECK(std::abs(r.loss - ref.loss) <= tol * std::abs(ref.loss));
  CHECK(std::abs(r.aux - ref.aux) <= tol * std::max(1e-300, std::abs(ref.aux)));
  CHECK(std::abs(r.norm - ref.norm) <= tol * ref.norm);
  REQUIRE(r.grads.size() == ref.grads.size());
  CHECK(rel_l2(r.grads.data(), ref.grads.data(), ref.grads.size()) <= tol);
  CHECK(rel_l2(r.values.data(), ref.values.data(), ref.values.size()) <= tol);
}

}  // namespace

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
