// The model under real MPI ranks (ctest runs this with 1, 2 and 4): loss and every
// parameter gradient are the same for every dp x cp layout that fits the world
// (cp = 1, 2, 4 and dp x cp = 2 x 2), and the conv halo moves exactly its formula.
#include <mpi.h>

#include <catch2/catch.hpp>

#include "comm/mpi_communicator.h"
#include "comm/single_communicator.h"
#include "cp/shard.h"
#include "model/model.h"
#include "ops/conv/conv_halo.h"
#include "test_support.h"
#include "train/mesh.h"

using namespace gdn;
using namespace gdn::test;

namespace {

ModelConfig tiny_model() {
  return make_model_config(29, 16, 2, 24, 1, 2, 8, 6, 0.2);
}

struct Batch {
  int B;
  std::int64_t T;
  std::vector<std::int32_t> seq;  // [B, T + 1]
};

Batch make_batch(int B, std::int64_t T, int vocab) {
  Batch b{B, T, std::vector<std::int32_t>(B * (T + 1))};
  Rng rng(99);
  for (auto& t : b.seq) t = std::int32_t(rng.next_u64() % vocab);
  return b;
}

struct Result {
  double loss = 0;
  std::vector<double> grads;  // all parameters, flat in order
};

// Loss and gradients of the whole global batch on a dp x cp mesh of world, summed over
// all ranks as the trainer does.
Result run_layout(Communicator& world, const ModelConfig& c, const Batch& batch, int dp, int cp,
                  int chunk) {
  Mesh mesh = make_mesh(world, dp, cp);
  Model<double, Host> model(c, chunk);
  model.init(5);
  const int Bl = batch.B / dp;
  const Shard s = contiguous_shard(batch.T, cp, mesh.cp_rank);
  std::vector<std::int32_t> tokens(Bl * s.size()), targets(Bl * s.size());
  for (int b = 0; b < Bl; ++b) {
    const std::int32_t* seq = batch.seq.data() + (mesh.dp_rank * Bl + b) * (batch.T + 1);
    std::copy_n(seq + s.begin, s.size(), tokens.data() + b * s.size());
    std::copy_n(seq + s.begin + 1, s.size(), targets.data() + b * s.size());
  }
  const double scale = 1.0 / double(batch.B * batch.T);
  Result r;
  const CpContext ctx{*mesh.cp_comm, s, batch.T, {}};
  r.loss =
      model.forward_backward(ctx, world, tokens.data(), targets.data(), Bl, scale).ce_sum * scale;
  world.all_reduce_sum(&r.loss, 1, "test.loss");
  r.grads = model.params().host_grads();
  world.all_reduce_sum(r.grads.data(), r.grads.size(), "test.grads");
  return r;
}

}  // namespace

TEST_CASE("loss and every gradient are independent of the dp x cp layout (fp64)", "[model]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const ModelConfig c = tiny_model();
  // seq_len 45 is not a multiple of cp * chunk_size for any cp here.
  const Batch batch = make_batch(/*B=*/2, /*T=*/45, c.vocab_size);
  SingleCommunicator alone;
  const Result ref = run_layout(alone, c, batch, 1, 1, 16);
  const int P = world.size();
  for (int cp : {1, 2, 4}) {
    for (int dp : {1, 2}) {
      if (dp * cp != P) continue;
      const Result r = run_layout(world, c, batch, dp, cp, 16);
      INFO("dp=" << dp << " cp=" << cp << " loss " << r.loss << " vs " << ref.loss);
      CHECK(std::abs(r.loss - ref.loss) <= 1e-10 * std::abs(ref.loss));
      CHECK(rel_l2(r.grads.data(), ref.grads.data(), ref.grads.size()) <= 1e-10);
    }
  }
}

TEST_CASE("the conv halo moves exactly (W-1)(2 Hk K + Hv V) elements per rank per layer",
          "[model][payload]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const ModelConfig c = tiny_model();
  const int P = world.size();
  const Batch batch = make_batch(1, 37, c.vocab_size);
  world.reset_counters();
  Mesh mesh = make_mesh(world, 1, P);
  Model<double, Host> model(c, 16);
  model.init(5);
  const Shard s = contiguous_shard(batch.T, P, world.rank());
  std::vector<std::int32_t> tokens(batch.seq.begin() + s.begin, batch.seq.begin() + s.end);
  std::vector<std::int32_t> targets(batch.seq.begin() + s.begin + 1, batch.seq.begin() + s.end + 1);
  mesh.cp_comm->reset_counters();
  model.forward_backward(CpContext{*mesh.cp_comm, s, batch.T, {}}, world, tokens.data(),
                         targets.data(), 1, 1.0);
  const std::int64_t halo = std::int64_t(c.linear_conv_kernel_dim - 1) *
                            (2 * c.linear_num_key_heads * c.linear_key_head_dim +
                             c.linear_num_value_heads * c.linear_value_head_dim) *
                            sizeof(double);
  const std::int64_t L = c.num_hidden_layers;
  const int r = world.rank();
  const CommCounter& f = mesh.cp_comm->counter(cp_sites::kConvHaloForward);
  const CommCounter& b = mesh.cp_comm->counter(cp_sites::kConvHaloBackward);
  INFO("rank " << r << " of " << P);
  // Forward: every rank but the last sends its halo, every rank but the first receives.
  CHECK(f.bytes_sent == (r + 1 < P ? L * halo : 0));
  CHECK(f.bytes_received == (r > 0 ? L * halo : 0));
  // Backward: the gradient of the same rows goes back the other way.
  CHECK(b.bytes_sent == (r > 0 ? L * halo : 0));
  CHECK(b.bytes_received == (r + 1 < P ? L * halo : 0));
}
