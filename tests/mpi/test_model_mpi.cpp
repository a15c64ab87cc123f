// The model under real MPI ranks (ctest runs this with 1, 2, 3 and 4): loss and every
// parameter gradient are the same for every dp x cp layout that fits the world
// (cp = 1, 2, 3, 4 and dp x cp = 2 x 2), for the GDN model and for the hybrid MoE model
// (attention in both balance modes, the router loss over the global batch); the conv halo
// and the attention exchange move exactly their formulas; recomputation, the blocked LM
// head and the intra-rank split of the GDN shards change nothing but rounding.
#include <mpi.h>

#include <catch2/catch.hpp>

#include "comm/call_sites.h"
#include "comm/mpi_communicator.h"
#include "comm/single_communicator.h"
#include "core/bf16.h"
#include "core/precision.h"
#include "cp/attention_cp.h"
#include "cp/conv_halo.h"
#include "cp/gdn_cp.h"
#include "cp/shard.h"
#include "model/model.h"
#include "mpi/model_batch.h"
#include "test_support.h"
#include "train/mesh.h"

using namespace gdn;
using namespace gdn::test;

namespace {

ModelConfig tiny_model() {
  return make_model_config(29, 16, 2, 24, 1, 2, 8, 6, 0.2);
}

struct Result {
  double loss = 0, aux = 0;
  std::vector<double> grads;  // all parameters, flat in order
};

// Loss and gradients of the whole global batch on a dp x cp mesh of world, summed over
// all ranks as the trainer does.
Result run_layout(Communicator& world, const ModelConfig& c, const Batch& batch, int dp, int cp,
                  int chunk, bool layer_local = false, ModelOptions options = {},
                  int split_pieces = 0, bool slow_decay = false) {
  Mesh mesh = make_mesh(world, dp, cp);
  Model<double, Host> model(c, chunk, options);
  model.init(5);
  if (slow_decay) {
    // A = exp(A_log) = 0.01 in every GDN layer: the state remembers the whole sequence, so
    // a piece's entry state depends on every piece before it. With the initial A up to
    // 16, a few chunks decay below rounding and piece boundaries change no bit.
    std::vector<double> v = model.params().host_values();
    for (const ParamInfo& i : model.params().infos())
      if (i.name.size() >= 5 && i.name.compare(i.name.size() - 5, 5, "A_log") == 0)
        std::fill_n(v.begin() + i.offset, i.size, std::log(0.01));
    model.params().set_values(v);
  }
  const int Bl = batch.B / dp;
  const Shard s = contiguous_shard(batch.T, cp, mesh.cp_rank);
  const ShardTokens part = shard_tokens(batch, dp, mesh.dp_rank, s);
  const double scale = 1.0 / double(batch.B * batch.T);
  Result r;
  CpOptions opt;
  opt.attention_layer_local = layer_local;
  opt.split_pieces = split_pieces;
  ModelComms comms = ModelComms::single(*mesh.cp_comm, opt);
  comms.batch = &world;
  model.set_comms(comms);
  const auto losses =
      model.forward_backward({s, batch.T}, part.tokens.data(), part.targets.data(), Bl, scale);
  r.loss = losses.ce_sum * scale;
  world.all_reduce_sum(&r.loss, 1, "test.loss");
  // The objective: aux is the same on every rank (reduced inside).
  r.loss += c.output_router_logits ? c.router_aux_loss_coef * losses.aux : 0.0;
  r.aux = losses.aux;
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

TEST_CASE("the hybrid MoE model is independent of the layout and of the attention balance (fp64)",
          "[model][attention][moe]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const ModelConfig c = hybrid_moe_model();
  // seq_len 29: not a multiple of any cp here, nor of 2 cp (the balanced chunks).
  const Batch batch = make_batch(/*B=*/2, /*T=*/29, c.vocab_size);
  SingleCommunicator alone;
  const Result ref = run_layout(alone, c, batch, 1, 1, 16);
  REQUIRE(ref.aux > 0);
  const int P = world.size();
  for (int cp = 1; cp <= 4; ++cp)
    for (int dp : {1, 2}) {
      if (dp * cp != P) continue;
      for (bool balanced : {false, true}) {
        const Result r = run_layout(world, c, batch, dp, cp, 16, balanced);
        INFO("dp=" << dp << " cp=" << cp << (balanced ? " layer_local" : " none") << " loss "
                   << r.loss << " vs " << ref.loss << ", aux " << r.aux << " vs " << ref.aux);
        CHECK(std::abs(r.loss - ref.loss) <= 1e-10 * std::abs(ref.loss));
        CHECK(std::abs(r.aux - ref.aux) <= 1e-10 * std::abs(ref.aux));
        CHECK(rel_l2(r.grads.data(), ref.grads.data(), ref.grads.size()) <= 1e-10);
      }
    }
}

TEST_CASE("recomputation is bit-identical; the blocked LM head and loss agree to 1e-12 (fp64)",
          "[model][memory]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int P = world.size();
  for (const ModelConfig& c : {tiny_model(), hybrid_moe_model()}) {
    const Batch batch = make_batch(/*B=*/2, /*T=*/29, c.vocab_size);
    for (int cp = 1; cp <= 4; ++cp)
      for (int dp : {1, 2}) {
        if (dp * cp != P) continue;
        const Result plain = run_layout(world, c, batch, dp, cp, 16);
        INFO("layers " << c.num_hidden_layers << " dp=" << dp << " cp=" << cp);
        // Recomputing each layer before its backward: the same bits.
        const Result again = run_layout(world, c, batch, dp, cp, 16, true, ModelOptions{true, 0});
        const Result again_plain = run_layout(world, c, batch, dp, cp, 16, true);
        CHECK(again.loss == again_plain.loss);
        CHECK(again.grads == again_plain.grads);
        // The LM head and cross-entropy in blocks of 5 tokens (the shard has at most 58).
        const Result blocked =
            run_layout(world, c, batch, dp, cp, 16, false, ModelOptions{false, 5});
        CHECK(std::abs(blocked.loss - plain.loss) <= 1e-12 * std::abs(plain.loss));
        CHECK(rel_l2(blocked.grads.data(), plain.grads.data(), plain.grads.size()) <= 1e-12);
        CHECK(blocked.grads != plain.grads);  // the blocks did change the summation order
      }
  }
}

TEST_CASE("the intra-rank split of every GDN layer's shard changes only rounding (fp64 1e-12)",
          "[model][split]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int P = world.size();
  for (const ModelConfig& c : {tiny_model(), hybrid_moe_model()}) {
    // seq_len 140 at chunk 16: every cp = 1..4 shard has at least 3 chunks, so S = 2, 3
    // pieces are taken as asked.
    const Batch batch = make_batch(/*B=*/2, /*T=*/140, c.vocab_size);
    for (int cp = 1; cp <= 4; ++cp)
      for (int dp : {1, 2}) {
        if (dp * cp != P) continue;
        const Result unsplit = run_layout(world, c, batch, dp, cp, 16, false, {}, 1, true);
        for (int S : {2, 3})
          for (bool recompute : {false, true}) {
            INFO("layers " << c.num_hidden_layers << " dp=" << dp << " cp=" << cp << " S=" << S
                           << (recompute ? " recompute" : ""));
            const Result r =
                run_layout(world, c, batch, dp, cp, 16, false, ModelOptions{recompute, 0}, S, true);
            CHECK(std::abs(r.loss - unsplit.loss) <= 1e-12 * std::abs(unsplit.loss));
            CHECK(rel_l2(r.grads.data(), unsplit.grads.data(), unsplit.grads.size()) <= 1e-12);
            // The pieces did run: the rounding moved. Except at cp = 1 with S = 2, where the
            // second piece's entry state M_0 * 0 + U_0 is the unsplit pass's state, bit for bit.
            if (cp > 1 || S > 2) CHECK(r.grads != unsplit.grads);
          }
      }
  }
}

TEST_CASE("attention CP moves K, V of the whole sequence; balanced, the triangle is shared evenly",
          "[attention][payload]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int P = world.size();
  const std::int64_t T = 48;  // 2P divides T for P = 1..4: equal balanced chunks
  const AttentionDims d{1, 4, 2, 8, 0.35};
  const std::int64_t kv = std::int64_t(d.Hkv) * d.D, Tmax = (T + P - 1) / P;
  for (bool balanced : {false, true}) {
    CpOptions opt;
    opt.attention_layer_local = balanced;
    const CpContext cp{world, contiguous_shard(T, P, world.rank()), T, opt};
    const std::int64_t n = cp.tokens();
    const Tensor<double> q = random_tensor<double>({1, n, d.Hq, d.D}, 1 + world.rank());
    const Tensor<double> k = random_tensor<double>({1, n, d.Hkv, d.D}, 11 + world.rank());
    const Tensor<double> v = random_tensor<double>({1, n, d.Hkv, d.D}, 21 + world.rank());
    std::vector<double> o(q.data.size()), dq(q.data.size()), dk(k.data.size()), dv(v.data.size());
    world.reset_counters();
    AttentionContextParallel<double, Host> core;
    core.forward(cp, d, q.ptr(), k.ptr(), v.ptr(), o.data());
    core.backward(cp, o.data(), dq.data(), dk.data(), dv.data());
    INFO("rank " << world.rank() << " of " << P << (balanced ? " layer_local" : " none"));
    if (P > 1) {
      // K and V of the longest shard from every rank (padded), in the forward; their
      // gradients summed back in the backward: 2 (Hkv D) per token, P blocks of Tmax.
      const std::int64_t block = 2 * Tmax * kv * std::int64_t(sizeof(double));
      CHECK(world.counter(attention_sites::kKvAllGather).bytes_received == P * block);
      CHECK(world.counter(attention_sites::kDkvReduceScatter).bytes_sent == P * block);
    }
    // This rank's share of the causal triangle: pairs (i, j <= i) of its query rows.
    double pairs = double(core.pairs()), hi = pairs, sum = pairs;
    world.all_reduce_max(&hi, 1, "test");
    world.all_reduce_sum(&sum, 1, "test");
    CHECK(sum == double(T * (T + 1) / 2));
    if (balanced) CHECK(hi == sum / P);  // 2P equal chunks: exactly even
    if (!balanced && P == 4) CHECK(hi / (sum / P) == Approx(1.75).epsilon(0.02));  // 7/16 of it
  }
}

TEST_CASE("in the bf16 mode attention CP gathers K, V in bf16: half the bytes, the same bits",
          "[attention][payload][bf16]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int P = world.size();
  const std::int64_t T = 48;
  const AttentionDims d{2, 4, 2, 8, 0.35};
  const std::int64_t kv = std::int64_t(d.Hkv) * d.D, Tmax = (T + P - 1) / P;
  const CpContext cp = CpContext::contiguous(world, T);
  const std::int64_t n = d.B * cp.tokens();
  // bf16 values, as the mixer hands them to the core in the bf16 mode.
  auto bf16_values = [&](std::int64_t width, std::uint64_t seed) {
    std::vector<float> x(std::size_t(n * width));
    const Tensor<double> r = random_tensor<double>({n, width}, seed + 100 * world.rank());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = round_bf16(float(r.data[i]));
    return x;
  };
  const std::vector<float> q = bf16_values(d.Hq * d.D, 1), k = bf16_values(kv, 2),
                           v = bf16_values(kv, 3), dO = bf16_values(d.Hq * d.D, 4);
  std::vector<std::vector<float>> results[2];
  for (bool bf16 : {false, true}) {
    AttentionDims dm = d;
    dm.precision = precision_of(bf16);
    std::vector<float> o(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
    world.reset_counters();
    AttentionContextParallel<float, Host> core;
    core.forward(cp, dm, q.data(), k.data(), v.data(), o.data());
    core.backward(cp, dO.data(), dq.data(), dk.data(), dv.data());
    results[bf16] = {o, dq, dk, dv};
    if (P > 1) {
      const std::int64_t block = d.B * 2 * Tmax * kv;
      INFO((bf16 ? "bf16 mode" : "float mode"));
      CHECK(world.counter(attention_sites::kKvAllGather).bytes_received ==
            P * block * std::int64_t(bf16 ? 2 : 4));
      CHECK(world.counter(attention_sites::kDkvReduceScatter).bytes_sent == P * block * 4);
    }
  }
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("rank " << world.rank() << ", output " << i << " of o, dq, dk, dv");
    CHECK(bit_difference(results[1][i], results[0][i]) == "");
  }
}

TEST_CASE("the conv halo moves exactly (W-1)(2 Hk K + Hv V) elements per rank per layer",
          "[model][payload]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const ModelConfig c = tiny_model();
  const int P = world.size();
  const Batch batch = make_batch(1, 37, c.vocab_size);
  // Recomputing, the second forward of each layer reuses the halo it got the first time
  // and the chunk entry states it made from the gathered pairs: the same exchange, once.
  for (bool recompute : {false, true}) {
    world.reset_counters();
    Mesh mesh = make_mesh(world, 1, P);
    Model<double, Host> model(c, 16, ModelOptions{recompute, 0});
    model.init(5);
    const Shard s = contiguous_shard(batch.T, P, world.rank());
    std::vector<std::int32_t> tokens(batch.seq.begin() + s.begin, batch.seq.begin() + s.end);
    std::vector<std::int32_t> targets(batch.seq.begin() + s.begin + 1,
                                      batch.seq.begin() + s.end + 1);
    mesh.cp_comm->reset_counters();
    ModelComms comms = ModelComms::single(*mesh.cp_comm);
    comms.batch = &world;
    model.set_comms(comms);
    model.forward_backward({s, batch.T}, tokens.data(), targets.data(), 1, 1.0);
    const std::int64_t halo = std::int64_t(c.linear_conv_kernel_dim - 1) *
                              (2 * c.linear_num_key_heads * c.linear_key_head_dim +
                               c.linear_num_value_heads * c.linear_value_head_dim) *
                              sizeof(double);
    const std::int64_t L = c.num_hidden_layers;
    const int r = world.rank();
    const CommCounter& f = mesh.cp_comm->counter(cp_sites::kConvHaloForward);
    const CommCounter& b = mesh.cp_comm->counter(cp_sites::kConvHaloBackward);
    INFO("rank " << r << " of " << P << (recompute ? ", recompute layer" : ""));
    // Forward: every rank but the last sends its halo, every rank but the first receives.
    CHECK(f.bytes_sent == (r + 1 < P ? L * halo : 0));
    CHECK(f.bytes_received == (r > 0 ? L * halo : 0));
    // Backward: the gradient of the same rows goes back the other way.
    CHECK(b.bytes_sent == (r > 0 ? L * halo : 0));
    CHECK(b.bytes_received == (r + 1 < P ? L * halo : 0));
    // One all-gather of the transition pairs per layer and step (none at cp = 1).
    CHECK(mesh.cp_comm->counter(cp_sites::kForwardPairs).calls == (P > 1 ? L : 0));
  }
}
