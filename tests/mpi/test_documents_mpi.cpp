// Packed documents under real MPI ranks (ctest runs this with 1, 2, 3 and 4; cp = every
// rank): the loss and every parameter gradient of a window of packed documents equal the
// token-weighted sum of the same documents run one by one as separate sequences on one
// rank, in fp64 to 1e-12. The layouts put boundaries on and beside the shard edges, hold
// one-token documents (also the first and the last of a window) and a document spanning
// every rank, at B = 1 and 3, in both attention balance modes and recomputing; a window
// that is one document equals the run without documents.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "comm/mpi_communicator.h"
#include "comm/single_communicator.h"
#include "cp/documents.h"
#include "model/model.h"
#include "mpi/model_batch.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

// The GDN + attention + MoE model of the layout tests, without the router loss in the
// objective: it is a statistic of the whole batch, not a sum over documents.
ModelConfig packed_model() {
  ModelConfig c = hybrid_moe_model();
  c.output_router_logits = false;
  return c;
}

constexpr int kChunk = 16;

struct Result {
  double loss = 0;
  std::vector<double> grads;
};

// The document boundaries of row layout `kind` of a window of T tokens over P ranks:
// 0: one-token documents first, last and at 5, boundaries on every shard edge and two
// tokens after it; 1: one document spanning every rank; 2: the whole window.
std::vector<std::int64_t> layout(int kind, std::int64_t T, int P) {
  std::set<std::int64_t> cu{0, T};
  if (kind == 0) {
    for (std::int64_t t : {std::int64_t(1), std::int64_t(5), std::int64_t(6), T - 1}) cu.insert(t);
    for (int r = 1; r < P; ++r) {
      const std::int64_t e = contiguous_shard(T, P, r).begin;
      cu.insert(e);
      cu.insert(e + 2);
    }
  } else if (kind == 1) {
    cu.insert(2);
    cu.insert(T - 3);
  }
  return {cu.begin(), cu.end()};
}

// Target t is not one when t + 1 starts a document inside the window.
std::vector<std::int32_t> masked_targets(const Batch& batch, const Documents& docs) {
  std::vector<std::int32_t> targets(std::size_t(batch.B * batch.T));
  for (int b = 0; b < batch.B; ++b) {
    const std::int32_t* seq = batch.seq.data() + b * (batch.T + 1);
    std::copy_n(seq + 1, batch.T, targets.data() + b * batch.T);
    const std::vector<std::int64_t>& cu = docs.row(b);
    for (std::size_t i = 1; i + 1 < cu.size(); ++i)
      targets[std::size_t(b * batch.T + cu[i] - 1)] = ops::kIgnoreTarget;
  }
  return targets;
}

std::int64_t counted(const std::vector<std::int32_t>& targets) {
  return std::int64_t(
      std::count_if(targets.begin(), targets.end(), [](int t) { return t != ops::kIgnoreTarget; }));
}

// The packed window at cp = world size: its loss (mean over the counted targets) and
// gradients, summed over the ranks.
Result run_packed(Communicator& world, const Batch& batch, const Documents* docs, bool layer_local,
                  bool recompute) {
  const ModelConfig c = packed_model();
  ModelOptions mo;
  mo.recompute = recompute;
  Model<double, Host> model(c, kChunk, mo);
  model.init(5);
  const Shard s = contiguous_shard(batch.T, world.size(), world.rank());
  const std::vector<std::int32_t> all_targets =
      docs ? masked_targets(batch, *docs) : std::vector<std::int32_t>{};
  ShardTokens part = shard_tokens(batch, 1, 0, s);
  std::int64_t n = batch.B * batch.T;
  if (docs) {
    n = counted(all_targets);
    for (int b = 0; b < batch.B; ++b)
      std::copy_n(all_targets.data() + b * batch.T + s.begin, s.size(),
                  part.targets.data() + b * s.size());
  }
  CpOptions opt;
  opt.attention_layer_local = layer_local;
  model.set_comms(ModelComms::single(world, opt));
  const double scale = 1.0 / double(n);
  const auto losses = model.forward_backward({s, batch.T, docs}, part.tokens.data(),
                                             part.targets.data(), batch.B, scale);
  Result r;
  r.loss = losses.ce_sum * scale;
  world.all_reduce_sum(&r.loss, 1, "test.loss");
  r.grads = model.params().host_grads();
  world.all_reduce_sum(r.grads.data(), r.grads.size(), "test.grads");
  return r;
}

// Each document alone, as a sequence of its own on one rank: its tokens, and as targets
// the tokens after them inside it (the last document of a window also predicts the token
// after the window). Loss and gradients summed with weight 1 / (all counted targets).
Result run_one_by_one(const Batch& batch, const Documents& docs) {
  const ModelConfig c = packed_model();
  struct Piece {
    std::vector<std::int32_t> tokens, targets;
  };
  std::vector<Piece> pieces;
  std::int64_t n = 0;
  for (int b = 0; b < batch.B; ++b) {
    const std::int32_t* seq = batch.seq.data() + b * (batch.T + 1);
    const std::vector<std::int64_t>& cu = docs.row(b);
    for (std::size_t i = 0; i + 1 < cu.size(); ++i) {
      const std::int64_t begin = cu[i], end = i + 2 == cu.size() ? cu[i + 1] : cu[i + 1] - 1;
      if (end == begin) continue;  // a one-token document inside the window: no target
      pieces.push_back({{seq + begin, seq + end}, {seq + begin + 1, seq + end + 1}});
      n += end - begin;
    }
  }
  Result r;
  SingleCommunicator alone;
  for (const Piece& p : pieces) {
    Model<double, Host> model(c, kChunk);
    model.init(5);
    const std::int64_t T = std::int64_t(p.tokens.size());
    model.set_comms(ModelComms::single(alone));
    const auto losses = model.forward_backward(StepShard::contiguous(T), p.tokens.data(),
                                               p.targets.data(), 1, 1.0 / double(n));
    r.loss += losses.ce_sum / double(n);
    const std::vector<double> g = model.params().host_grads();
    if (r.grads.empty()) r.grads.assign(g.size(), 0.0);
    for (std::size_t i = 0; i < g.size(); ++i) r.grads[i] += g[i];
  }
  return r;
}

void check_close(const Result& got, const Result& want, double tol) {
  INFO("loss " << got.loss << " vs " << want.loss);
  CHECK(std::abs(got.loss - want.loss) <= tol * std::abs(want.loss));
  REQUIRE(got.grads.size() == want.grads.size());
  CHECK(rel_l2(got.grads.data(), want.grads.data(), want.grads.size()) <= tol);
}

}  // namespace

TEST_CASE("a packed window equals its documents run one by one (fp64, cp = world)", "[documents]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int P = world.size();
  const std::int64_t T = 48;
  const ModelConfig c = packed_model();
  for (int B : {1, 3}) {
    const Batch batch = make_batch(B, T, c.vocab_size, 17 + std::uint64_t(B));
    std::vector<std::vector<std::int64_t>> rows;
    for (int b = 0; b < B; ++b) rows.push_back(layout(B == 1 ? 0 : b, T, P));
    const Documents docs(rows, T);
    const Result want = run_one_by_one(batch, docs);
    for (bool layer_local : {false, true})
      for (bool recompute : {false, true}) {
        INFO("P=" << P << " B=" << B << (layer_local ? " layer_local" : "")
                  << (recompute ? " recompute" : ""));
        check_close(run_packed(world, batch, &docs, layer_local, recompute), want, 1e-12);
      }
  }
}

TEST_CASE("every layout of one document per row equals the run without documents (fp64)",
          "[documents]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const std::int64_t T = 41;
  const Batch batch = make_batch(3, T, packed_model().vocab_size, 23);
  const Documents whole = Documents::whole(3, T);
  for (bool layer_local : {false, true}) {
    INFO("P=" << world.size() << (layer_local ? " layer_local" : ""));
    const Result none = run_packed(world, batch, nullptr, layer_local, false);
    // The only masked target would be after the window: none.
    check_close(run_packed(world, batch, &whole, layer_local, false), none, 1e-12);
  }
}

TEST_CASE("document boundaries are checked", "[documents]") {
  CHECK_THROWS_WITH(Documents({{0, 3, 3, 8}}, 8), Catch::Contains("boundary 2 = 3"));
  CHECK_THROWS_WITH(Documents({{0, 5}}, 8), Catch::Contains("from 0 to the window's 8"));
  CHECK_THROWS_WITH(Documents({{1, 8}}, 8), Catch::Contains("from 0 to the window's 8"));
  const std::int32_t tokens[] = {4, 9, 2, 9, 9, 1, 9};  // eos 9: documents end with it
  const std::vector<std::int64_t> starts = Documents::starts_after(tokens, 7, 9);
  CHECK(starts == std::vector<std::int64_t>{2, 4, 5, 7});
  const Documents d = Documents::from_starts({starts}, 7);
  CHECK(d.row(0) == std::vector<std::int64_t>{0, 2, 4, 5, 7});
  // The targets of each document's last token are not ones, the window's last included.
  std::vector<std::int32_t> targets(5, 1);
  d.mask_targets(Shard{2, 7}, targets.data());
  const std::int32_t X = ops::kIgnoreTarget;
  CHECK(targets == std::vector<std::int32_t>{1, X, X, 1, X});
  CHECK(d.ignored_targets() == 4);  // three boundaries inside, one after the window
  CHECK_THROWS_WITH(Documents::from_starts({{3, 2}}, 7), Catch::Contains("starts at 2"));
  CHECK(d.positions(Shard{1, 6}) == std::vector<std::int64_t>{1, 0, 1, 0, 0});
  CHECK(d.starts({0, 3, 6}) == std::vector<std::int64_t>{0, 2, 5});
  const Documents::Summary s = d.summary();
  CHECK(s.documents == 4);
  CHECK(s.longest == 2);
}
