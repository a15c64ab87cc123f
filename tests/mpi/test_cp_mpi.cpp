// Context parallelism across real MPI ranks (ctest runs this under mpirun with 2, 3, 4
// ranks): every rank's shard of the outputs and gradients must equal the same slice of
// the single-rank oracle, for the all-gather scan and the log-depth scan alike, with and
// without the intra-rank split of each shard (gdn/split/split_pass.h), and the cross-rank
// payload must be exactly the fixed-size pairs.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "comm/call_sites.h"
#include "comm/mpi_communicator.h"
#include "cp/gdn_cp.h"
#include "gdn/op/op.h"
#include "gdn/pass/local_pass.h"
#include "gdn/recurrent.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

// A rank's shard of a [B, T, ...] tensor.
template <typename T>
Tensor<T> token_slice(const Tensor<T>& x, const Shard& s) {
  return gdn::test::token_slice(x, s.begin, s.end);
}

template <typename T>
struct CpResult {
  Tensor<T> o, ht;
  Grads<T> grads;
  int pieces = 1;  // how the split cut this rank's shard
};

// Runs the CP op on this rank's shard of the full inputs.
// The options of one of the two cross-rank scans.
CpOptions scan_options(bool log_depth) {
  CpOptions o;
  o.pair_scan = log_depth ? PairScan::log_depth : PairScan::allgather;
  return o;
}

template <typename T>
CpResult<T> run_cp(Communicator& comm, const Case& c, const GdnInputs<T>& full, const Tensor<T>& dO,
                   const Tensor<T>& dht, CpOptions opt) {
  const GdnProblem& p = c.p;
  const Shard s = contiguous_shard(p.T, comm.size(), comm.rank());
  GdnProblem local_shape = p;
  local_shape.T = s.size();
  local_shape.cu_seqlens.clear();
  const Tensor<T> q = token_slice(full.q, s), k = token_slice(full.k, s),
                  v = token_slice(full.v, s), g = token_slice(full.g, s),
                  beta = token_slice(full.beta, s), dOl = token_slice(dO, s);
  GdnInputView<T> in{q.ptr(), k.ptr(),    v.ptr(),
                     g.ptr(), beta.ptr(), c.h0 ? full.h0.ptr() : nullptr};
  CpResult<T> r{Tensor<T>(output_shape(local_shape)), Tensor<T>(state_shape(p)),
                Grads<T>(local_shape, false)};
  r.grads.dh0 = Tensor<T>(c.h0 ? state_shape(p) : Shape{0});
  const CpContext cp = CpContext::contiguous(comm, p.T, opt);
  GdnContextParallel<T, Host> op;
  op.forward(cp, p, in, r.o.ptr(), r.ht.ptr());
  GdnGradView<T> gv = r.grads.view();
  op.backward(cp, dOl.ptr(), c.dht ? dht.ptr() : nullptr, gv);
  r.pieces = op.piece_split().pieces;
  return r;
}

// A case's inputs and cotangents (from seeds seed, seed + 1, seed + 2) and the oracle's
// outputs and gradients over the whole sequence, on every rank. A slow decay (g about
// -0.012 per token) so the state carries real weight across every shard boundary; with
// the default decay it fades within a shard.
struct Oracle {
  GdnInputs<double> d;
  Tensor<double> dO, dht, o, ht;
  Grads<double> ref;
};

Oracle run_oracle(const Case& c, std::uint64_t seed) {
  const GdnProblem& p = c.p;
  Oracle r{random_gdn_inputs<double>(p, seed, c.h0, /*g_scale=*/0.05),
           random_tensor<double>(output_shape(p), seed + 1),
           random_tensor<double>(state_shape(p), seed + 2),
           Tensor<double>(output_shape(p)),
           Tensor<double>(state_shape(p)),
           Grads<double>(p, c.h0)};
  forget_at(r.d, c.forget);
  recurrent_forward(p, r.d.view(), r.o.ptr(), r.ht.ptr());
  GdnGradView<double> rv = r.ref.view();
  recurrent_backward(p, r.d.view(), r.dO.ptr(), c.dht ? r.dht.ptr() : nullptr, rv);
  return r;
}

// The oracle's gradient `want` as a rank with shard s holds it: dh0 whole, the rest its shard.
Tensor<double> rank_part(const std::pair<std::string, const Tensor<double>*>& want,
                         const Shard& s) {
  return want.first == "dh0" ? *want.second : token_slice(*want.second, s);
}

void check_case(Communicator& comm, const Case& c) {
  const GdnProblem& p = c.p;
  const auto& [d, dO, dht, o, ht, ref] = run_oracle(c, 21);
  const Shard s = contiguous_shard(p.T, comm.size(), comm.rank());
  // The test is only as good as the state crossing rank boundaries: on a shard that
  // continues a sequence, starting from zero instead of h_in must change the output.
  if (p.cu_seqlens.empty() && c.forget.empty() && s.begin > 0 && s.size() > 0 && !p.l2norm_qk) {
    const Tensor<double> q = token_slice(d.q, s), k = token_slice(d.k, s), v = token_slice(d.v, s),
                         g = token_slice(d.g, s), beta = token_slice(d.beta, s);
    LocalPass<double, Host> alone(p, s.begin, s.end,
                                  {q.ptr(), k.ptr(), v.ptr(), g.ptr(), beta.ptr()});
    alone.prepare();
    Tensor<double> o_zero({p.B, s.size(), p.Hv, p.V});
    alone.output(nullptr, o_zero.ptr(), nullptr);
    INFO(c.name << ": rank " << comm.rank() << " output without the incoming state");
    CHECK(rel_l2(o_zero, token_slice(o, s)) > 1e-2);
  }
  for (bool log_depth : {false, true}) {
    const CpResult<double> r = run_cp(comm, c, d, dO, dht, scan_options(log_depth));
    INFO(c.name << " P=" << comm.size() << " rank " << comm.rank() << " shard [" << s.begin << ", "
                << s.end << ") " << (log_depth ? "log-depth" : "all-gather") << " scan");
    CHECK(rel_l2(r.o, token_slice(o, s)) <= 1e-10);
    CHECK(rel_l2(r.ht, ht) <= 1e-10);
    const auto got = r.grads.named();
    const auto want = ref.named();
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO(got[i].first);
      CHECK(rel_l2(*got[i].second, rank_part(want[i], s)) <= 1e-10);
    }
  }
}

// The intra-rank split inside every rank's shard: each result equals the unsplit CP run
// (1e-12) and the oracle (1e-10), for both cross-rank scans and both piece scans.
void check_split_case(Communicator& comm, const Case& c, int S) {
  const GdnProblem& p = c.p;
  const auto& [d, dO, dht, o, ht, ref] = run_oracle(c, 24);
  const Shard s = contiguous_shard(p.T, comm.size(), comm.rank());
  for (bool log_depth : {false, true}) {
    CpOptions unsplit_opt = scan_options(log_depth);
    unsplit_opt.split_pieces = 1;
    const CpResult<double> unsplit = run_cp(comm, c, d, dO, dht, unsplit_opt);
    for (bool split_log_depth : {false, true}) {
      CpOptions opt = scan_options(log_depth);
      opt.split_pieces = S;
      opt.split_log_depth = split_log_depth;
      const CpResult<double> r = run_cp(comm, c, d, dO, dht, opt);
      INFO(c.name << " P=" << comm.size() << " rank " << comm.rank() << " shard [" << s.begin
                  << ", " << s.end << ") " << (log_depth ? "log-depth" : "all-gather")
                  << " scan, S=" << S << (split_log_depth ? " log-depth" : " serial chain"));
      CHECK(unsplit.pieces == 1);
      CHECK(r.pieces == S);  // every shard has at least S chunks
      CHECK(rel_l2(r.o, unsplit.o) <= 1e-12);
      CHECK(rel_l2(r.ht, unsplit.ht) <= 1e-12);
      CHECK(rel_l2(r.o, token_slice(o, s)) <= 1e-10);
      CHECK(rel_l2(r.ht, ht) <= 1e-10);
      const auto got = r.grads.named(), base = unsplit.grads.named(), want = ref.named();
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO(got[i].first);
        CHECK(rel_l2(*got[i].second, *base[i].second) <= 1e-12);
        CHECK(rel_l2(*got[i].second, rank_part(want[i], s)) <= 1e-10);
      }
    }
  }
}

// T such that the last rank holds no token (ceil split).
int length_with_empty_rank(int P) {
  return P == 2 ? 1 : P == 3 ? 4 : (P - 1) * 2;
}

}  // namespace

TEST_CASE("CP equals the single-rank oracle, forward and backward (fp64)", "[cp]") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int P = comm.size();
  const std::vector<Case> cases = {
      {"T not divisible by P, h0, dht", make_problem(2, 101, 1, 2, 8, 12, 16, true), true, true},
      {"Hv = 4 Hk, K != V, C=32", make_problem(1, 157, 1, 4, 12, 6, 32), false, true},
      {"a rank with no tokens", make_problem(1, length_with_empty_rank(P), 1, 2, 4, 4, 16), true,
       true},
      {"packed sequences crossing rank boundaries",
       make_problem(1, 150, 1, 2, 8, 8, 16, true, {0, 10, 11, 80, 150}), true, true},
      {"packed, a boundary on a shard boundary",
       make_problem(1, 100, 1, 2, 8, 8, 16, false, {0, 25, 50, 60, 100}), true, true},
      {"no h0, no dht", make_problem(1, 90, 2, 2, 8, 8, 64, true), false, false},
      {"zero-length sequences, one on a shard boundary",
       make_problem(1, 96, 1, 2, 8, 8, 16, true, {0, 0, 24, 24, 48, 48, 96, 96}), true, true},
      {"g = -inf on and next to shard boundaries",
       make_problem(2, 101, 1, 2, 8, 8, 16),
       true,
       true,
       {0, 24, 25, 26, 50, 51, 76, 100}},
  };
  for (const Case& c : cases) check_case(comm, c);
}

TEST_CASE("CP with every shard split into pieces equals the unsplit CP and the oracle",
          "[cp][split]") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const std::vector<Case> cases = {
      {"B*Hv = 1, h0, dht, T not a multiple of C", make_problem(1, 389, 1, 1, 8, 12, 16), true,
       true},
      {"B*Hv = 2 (B = 2), l2norm", make_problem(2, 301, 1, 1, 8, 8, 16, true), true, true},
      {"packed sequences crossing rank and piece boundaries",
       make_problem(1, 400, 1, 2, 8, 8, 16, true, {0, 10, 11, 150, 150, 290, 400}), true, true},
      {"g = -inf", make_problem(1, 300, 1, 1, 8, 8, 16), true, true, {0, 47, 48, 160, 299}},
  };
  for (const Case& c : cases)
    for (int S : {2, 3}) check_split_case(comm, c, S);
}

TEST_CASE("CP in fp32 matches the fp32 single-rank chunked op", "[cp]") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const Case c{"fp32", make_problem(1, 203, 1, 2, 16, 16, 64, true), true, true};
  const GdnInputs<double> d64 = random_gdn_inputs<double>(c.p, 31, true);
  const GdnInputs<float> d{cast<float>(d64.q), cast<float>(d64.k),    cast<float>(d64.v),
                           cast<float>(d64.g), cast<float>(d64.beta), cast<float>(d64.h0)};
  const Tensor<float> dO = random_tensor<float>(output_shape(c.p), 32);
  const Tensor<float> dht = random_tensor<float>(state_shape(c.p), 33);
  Tensor<float> o(output_shape(c.p)), ht(state_shape(c.p));
  ChunkedGdn<float> single(c.p, d.view());
  single.forward(o.ptr(), ht.ptr());
  const Shard s = contiguous_shard(c.p.T, comm.size(), comm.rank());
  const CpResult<float> r = run_cp(comm, c, d, dO, dht, {});
  CHECK(rel_l2(r.o, token_slice(o, s)) <= 1e-5);
  CHECK(rel_l2(r.ht, ht) <= 1e-5);
}

TEST_CASE("cross-rank payload is the fixed-size pairs, whatever the sequence length", "[payload]") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const std::int64_t P = comm.size();
  const int B = 1, Hv = 2, K = 16, V = 8;
  const std::int64_t fwd = P * B * Hv * K * (K + V) * sizeof(double);
  const std::int64_t bwd = P * B * Hv * K * V * sizeof(double);
  for (int T : {256, 1024, 4096}) {
    const Case c{"payload", make_problem(B, T, 1, Hv, K, V, 64, true), false, false};
    const GdnInputs<double> d = random_gdn_inputs<double>(c.p, 41, false);
    const Tensor<double> dO = random_tensor<double>(output_shape(c.p), 42);
    comm.reset_counters();
    run_cp(comm, c, d, dO, dO, {});
    INFO("T=" << T << " P=" << P);
    CHECK(comm.counter(cp_sites::kForwardPairs).calls == 1);
    CHECK(comm.counter(cp_sites::kForwardPairs).bytes_received == fwd);
    CHECK(comm.counter(cp_sites::kBackwardAdjoints).calls == 1);
    CHECK(comm.counter(cp_sites::kBackwardAdjoints).bytes_received == bwd);
    // Besides the pairs, only the final state asked for (run_cp passes ht) crosses ranks.
    const std::int64_t final_state = B * Hv * K * V * sizeof(double);
    CHECK(comm.counter(cp_sites::kFinalState).bytes_received == final_state);
    std::int64_t total = 0;
    for (const auto& [site, cnt] : comm.counters()) total += cnt.bytes_received;
    CHECK(total == fwd + bwd + final_state);

    // Log-depth: ceil(log2 P) rounds, at most one pair sent per round.
    comm.reset_counters();
    run_cp(comm, c, d, dO, dO, scan_options(true));
    const std::int64_t rounds = std::int64_t(std::ceil(std::log2(double(P))));
    const std::int64_t pair = B * Hv * K * (K + V) * sizeof(double);
    const CommCounter& f = comm.counter(cp_sites::kForwardLogScan);
    const CommCounter& b = comm.counter(cp_sites::kBackwardLogScan);
    CHECK(f.calls == rounds);
    CHECK(f.bytes_sent <= rounds * pair);
    CHECK(b.bytes_sent <= rounds * pair);
    CHECK(f.bytes_sent % pair == 0);
  }
}
