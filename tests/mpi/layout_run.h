// One training step of a global batch on a dp x cp (x ep) mesh, as the trainer runs it,
// for the MPI tests that compare layouts (test_shard_mpi, test_pair_scan_mpi): the loss,
// the gradients summed over the world, the norm and the values after one AdamW step, with
// the training state replicated or sharded, the experts over ep ranks, recomputation,
// packed documents and the cp group's exchange options.
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "cp/documents.h"
#include "cp/shard.h"
#include "model/model.h"
#include "mpi/model_batch.h"
#include "ops/adamw/adamw.h"
#include "test_support.h"
#include "train/mesh.h"
#include "train/optimizer.h"
#include "train/replicated_state.h"
#include "train/sharded_state.h"

namespace gdn::test {

struct Result {
  double loss = 0, aux = 0, norm = 0;
  std::vector<double> grads;   // every parameter, flat in order, summed over the world
  std::vector<double> values;  // after one AdamW step
  std::map<std::string, CommCounter> cp_sites;  // this rank's cp group's counters
};

// The whole model's flat order (ep = 1) put together from every rank's runs [lo, hi) of
// its flat order, at `at` in `mine` (the runs are disjoint: a sum assembles them).
struct Piece {
  std::int64_t lo, hi, at;
};
inline std::vector<double> assemble(Communicator& world, const std::vector<ParamInfo>& infos,
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
// cp_options: the cp group's exchange options; documents: of the whole batch (null: each
// row one sequence), each dp group takes its rows.
inline Result run_layout(Communicator& world, const ModelConfig& c, const Batch& batch, int dp,
                         int cp, Sharding shard, bool recompute, int ep = 1,
                         const CpOptions& cp_options = {}, const Documents* documents = nullptr) {
  Mesh mesh = make_mesh(world, dp, cp, ep);
  ModelOptions mo;
  mo.recompute = recompute;
  mo.by_unit = shard == Sharding::full;
  mo.experts = {ep, mesh.ep_rank};
  Model<double, Host> model(c, 16, mo);
  ModelComms comms = ModelComms::single(*mesh.cp_comm, cp_options);
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
  std::unique_ptr<Documents> group_docs;  // this dp group's rows
  if (documents) group_docs = std::make_unique<Documents>(documents->slice(mesh.dp_rank * Bl, Bl));
  world.reset_counters();
  const auto losses = model.forward_backward({s, batch.T, group_docs.get()}, part.tokens.data(),
                                             part.targets.data(), Bl, scale);
  Result r;
  r.loss = losses.ce_sum * scale;
  world.all_reduce_sum(&r.loss, 1, "test.loss");
  r.aux = losses.aux;
  r.cp_sites = mesh.cp_comm->counters();
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

inline void check_same(const Result& r, const Result& ref, double tol) {
  CHECK(std::abs(r.loss - ref.loss) <= tol * std::abs(ref.loss));
  CHECK(std::abs(r.aux - ref.aux) <= tol * std::max(1e-300, std::abs(ref.aux)));
  CHECK(std::abs(r.norm - ref.norm) <= tol * ref.norm);
  REQUIRE(r.grads.size() == ref.grads.size());
  CHECK(rel_l2(r.grads.data(), ref.grads.data(), ref.grads.size()) <= tol);
  CHECK(rel_l2(r.values.data(), ref.values.data(), ref.values.size()) <= tol);
}

}  // namespace gdn::test
