// Activation recomputation of the GDN core (docs/design.md §6b): the replayed forward
// remakes the outputs from the per-chunk entry states the first forward kept
// (LocalPass::output_from_states, SplitLocalPass, GdnContextParallel after
// release(Keep::replay)), in parallel over chunks. Its o and ht, and the backward after
// it, must be the same bits as a plain forward and backward, in fp64 and fp32, on packed
// sequences and on a slice that continues a sequence from h_in. And it must really start
// every chunk from its kept state: with the rows of a slice's first chunk changed after
// the first forward, a sequential rerun changes every later output of that sequence,
// the replay none of them.
#include <catch2/catch.hpp>
#include <cstring>

#include "comm/single_communicator.h"
#include "cp/gdn_cp.h"
#include "gdn/pass/local_pass.h"
#include "gdn/split/split_pass.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

// Whether rows [t0, t1) of the token axis of two [B, T, ...] tensors are the same bits.
template <typename T>
bool same_token_rows(const Tensor<T>& a, const Tensor<T>& b, std::int64_t t0, std::int64_t t1) {
  const std::int64_t B = a.shape[0], Tn = a.shape[1], row = a.size() / (B * Tn);
  for (std::int64_t r = 0; r < B; ++r)
    if (std::memcmp(a.ptr() + (r * Tn + t0) * row, b.ptr() + (r * Tn + t0) * row,
                    sizeof(T) * (t1 - t0) * row) != 0)
      return false;
  return true;
}

// A slice [t0, t1) of a problem with its seeded tokens, an entry state h_in and an exit
// adjoint lambda (the P > 1 interface of the local passes), and the cotangents.
template <typename T>
struct Slice {
  GdnProblem p;
  std::int64_t t0, t1;
  Tensor<T> q, k, v, g, beta, h0, h_in, lambda, dO, dht;

  Slice(const GdnProblem& p_, std::int64_t t0_, std::int64_t t1_) : p(p_), t0(t0_), t1(t1_) {
    // A slow decay (g about -0.012 per token): the state carries weight across chunks.
    const GdnInputs<double> d = random_gdn_inputs<double>(p, 71, /*with_h0=*/true, 0.05);
    const int BH = p.B * p.Hv;
    q = cast<T>(token_slice(d.q, t0, t1));
    k = cast<T>(token_slice(d.k, t0, t1));
    v = cast<T>(token_slice(d.v, t0, t1));
    g = cast<T>(token_slice(d.g, t0, t1));
    beta = cast<T>(token_slice(d.beta, t0, t1));
    h0 = cast<T>(d.h0);
    h_in = cast<T>(random_tensor<double>({BH, p.K, p.V}, 72));
    lambda = cast<T>(random_tensor<double>({BH, p.K, p.V}, 73));
    dO = cast<T>(random_tensor<double>({p.B, t1 - t0, p.Hv, p.V}, 74));
    dht = cast<T>(random_tensor<double>(state_shape(p), 75));
  }
  GdnInputView<T> view() const {
    return {q.ptr(), k.ptr(), v.ptr(), g.ptr(), beta.ptr(), h0.ptr()};
  }
  GdnProblem local() const {
    GdnProblem l = p;
    l.T = t1 - t0;
    return l;
  }
};

// What the passes give: o, ht (untouched rows keep a sentinel), D and the gradients.
template <typename T>
struct Results {
  Tensor<T> o, ht, D;
  Grads<T> grads;
  explicit Results(const Slice<T>& s)
      : o({s.p.B, s.t1 - s.t0, s.p.Hv, s.p.V}),
        ht(state_shape(s.p)),
        D({s.p.B * s.p.Hv, s.p.K, s.p.V}),
        grads(s.local(), false) {
    grads.dh0 = Tensor<T>(state_shape(s.p));
    std::fill(ht.data.begin(), ht.data.end(), T(7));
  }
  void check_same(const Results& want) const {
    CHECK(bit_difference(o, want.o) == "");
    CHECK(bit_difference(ht, want.ht) == "");
    CHECK(bit_difference(D, want.D) == "");
    const auto g = grads.named(), w = want.grads.named();
    for (std::size_t i = 0; i < g.size(); ++i) {
      INFO(g[i].first);
      CHECK(bit_difference(*g[i].second, *w[i].second) == "");
    }
  }
};

// The backward of a local pass as GdnContextParallel's runs it at P > 1 on the host:
// prepare, the adjoint D from a zero exit adjoint, then the full backward from lambda.
template <typename T, typename Pass>
void local_backward(Pass& pass, const Slice<T>& s, Results<T>& r) {
  pass.prepare();
  pass.adjoint(s.dO.ptr(), s.dht.ptr(), r.D.ptr());
  GdnGradView<T> gv = r.grads.view();
  pass.backward(s.lambda.ptr(), s.dO.ptr(), s.dht.ptr(), gv);
}

// A plain forward from h_in and the backward.
template <typename T, typename Pass>
Results<T> plain(Pass& pass, const Slice<T>& s) {
  Results<T> r(s);
  pass.output(s.h_in.ptr(), r.o.ptr(), r.ht.ptr());
  pass.release_factors();
  local_backward(pass, s, r);
  return r;
}

// The forward, release(Keep::replay), reset on `again` (the same slice; the recomputed
// layer's own copies of the inputs), the outputs from the kept states, and the backward.
template <typename T, typename Pass, typename Reset>
Results<T> replayed(Pass& pass, const Slice<T>& s, const Slice<T>& again, Reset reset) {
  Results<T> first(s), r(s);
  pass.output(s.h_in.ptr(), first.o.ptr(), first.ht.ptr());
  pass.release(Keep::replay);
  reset(pass, again);
  pass.output_from_states(r.o.ptr(), r.ht.ptr());
  CHECK(bit_difference(r.o, first.o) == "");
  CHECK(bit_difference(r.ht, first.ht) == "");
  local_backward(pass, again, r);
  return r;
}

// Sequences of lengths 37, 0, 113, 10, 173, 67 (one empty), 2 value heads per key head,
// C = 16. The slice [100, 350) continues sequence 2 from h_in (local tokens 0 to 50,
// chunks 0-3), holds sequences 3 and 4 and stops inside 5.
GdnProblem packed_problem() {
  return make_problem(1, 400, 1, 2, 8, 8, 16, false, {0, 37, 37, 150, 160, 333, 400});
}

template <typename T>
void check_local_pass_replay(const GdnProblem& p, std::int64_t t0, std::int64_t t1) {
  const Slice<T> s(p, t0, t1), again(p, t0, t1);
  auto reset = [](LocalPass<T, Host>& pass, const Slice<T>& x) {
    pass.reset(x.p, x.t0, x.t1, x.view());
  };
  LocalPass<T, Host> a, b;
  reset(a, s);
  const Results<T> want = plain(a, s);
  reset(b, s);
  replayed(b, s, again, reset).check_same(want);
  if (t0 == 0) return;  // every sequence starts in the slice: h_in enters nothing
  // The test means something: without h_in the slice's first chunk would differ.
  Results<T> zero(s);
  a.reset(p, t0, t1, s.view());
  a.output(nullptr, zero.o.ptr(), nullptr);
  CHECK(!same_bits(zero.o, want.o));
}

template <typename T>
void check_split_pass_replay(const GdnProblem& p, std::int64_t t0, std::int64_t t1, int S,
                             bool log_depth) {
  const Slice<T> s(p, t0, t1), again(p, t0, t1);
  auto reset = [&](SplitLocalPass<T>& pass, const Slice<T>& x) {
    pass.reset(x.p, x.t0, x.t1, x.view(), {S, log_depth});
  };
  SplitLocalPass<T> a, b;
  reset(a, s);
  REQUIRE(a.pieces() == S);
  const Results<T> want = plain(a, s);
  reset(b, s);
  replayed(b, s, again, reset).check_same(want);
}

}  // namespace

TEST_CASE("LocalPass: outputs from the kept chunk states, then the backward, same bits",
          "[recompute]") {
  SECTION("packed sequences, the slice continues one from h_in (fp64)") {
    check_local_pass_replay<double>(packed_problem(), 100, 350);
  }
  SECTION("packed sequences, the slice continues one from h_in (fp32)") {
    check_local_pass_replay<float>(packed_problem(), 100, 350);
  }
  SECTION("B = 2, one sequence each, an interior slice (fp64 and fp32)") {
    const GdnProblem p = make_problem(2, 203, 1, 1, 8, 12, 16);
    check_local_pass_replay<double>(p, 37, 190);
    check_local_pass_replay<float>(p, 37, 190);
  }
  SECTION("the whole sequence (P = 1), packed, fp64") {
    check_local_pass_replay<double>(packed_problem(), 0, 400);
  }
}

TEST_CASE("SplitLocalPass: outputs from every piece's kept states, same bits", "[recompute]") {
  for (int S : {1, 3})
    for (bool log_depth : {false, true}) {
      INFO("S=" << S << (log_depth ? " log-depth" : " serial chain"));
      check_split_pass_replay<double>(packed_problem(), 100, 350, S, log_depth);
      check_split_pass_replay<float>(packed_problem(), 100, 350, S, log_depth);
      check_split_pass_replay<double>(make_problem(2, 203, 1, 1, 8, 12, 16), 37, 190, S, log_depth);
    }
}

TEST_CASE("the replay starts every chunk from its kept state, not from the chunk before",
          "[recompute]") {
  // After the first forward, the rows of the slice's first chunk change. Sequence 2 runs
  // on to local token 50 (chunks 0-3): a sequential rerun carries the change into chunks
  // 1-3; the replay remakes chunks 1-3 from their kept states, unchanged, and only chunk 0
  // from its new rows. (A real recomputation has the same rows; this tells the two apart.)
  const GdnProblem p = packed_problem();
  const std::int64_t C = p.chunk_size, seq_end = 50;
  const Slice<double> s(p, 100, 350);
  Slice<double> changed(p, 100, 350);
  for (std::int64_t x = 0; x < C * p.Hv * p.V; ++x) changed.v.data[x] += 0.5;
  Results<double> first(s), sequential(s), replay(s);

  LocalPass<double, Host> seq(p, s.t0, s.t1, changed.view());
  seq.output(s.h_in.ptr(), sequential.o.ptr(), nullptr);
  LocalPass<double, Host> pass(p, s.t0, s.t1, s.view());
  pass.output(s.h_in.ptr(), first.o.ptr(), nullptr);
  pass.release(Keep::replay);
  pass.reset(p, s.t0, s.t1, changed.view());
  pass.output_from_states(replay.o.ptr(), nullptr);

  CHECK(!same_token_rows(sequential.o, first.o, C, seq_end));  // the change carries on
  CHECK(same_token_rows(replay.o, first.o, C, s.t1 - s.t0));   // not from the kept states
  CHECK(!same_token_rows(replay.o, first.o, 0, C));            // chunk 0: its new rows
  CHECK(same_token_rows(replay.o, sequential.o, 0, C));
}

TEST_CASE("output_from_states without kept states says so", "[recompute]") {
  const Slice<double> s(packed_problem(), 100, 350);
  Results<double> r(s);
  LocalPass<double, Host> pass(s.p, s.t0, s.t1, s.view());
  CHECK_THROWS_WITH(pass.output_from_states(r.o.ptr(), nullptr),
                    Catch::Contains("without kept chunk entry states of slice [100, 350)"));
  pass.output(s.h_in.ptr(), r.o.ptr(), nullptr);
  pass.release(Keep::nothing);
  pass.reset(s.p, s.t0, s.t1, s.view());
  CHECK_THROWS_WITH(pass.output_from_states(r.o.ptr(), nullptr),
                    Catch::Contains("without kept chunk entry states"));
  // Kept, but for another slice: the next reset() moves the layout.
  pass.output(s.h_in.ptr(), r.o.ptr(), nullptr);
  pass.release(Keep::replay);
  pass.reset(s.p, s.t0, s.t1 - 1, s.view());
  CHECK_THROWS_WITH(pass.output_from_states(r.o.ptr(), nullptr),
                    Catch::Contains("without kept chunk entry states of slice [100, 349)"));
  // Kept for the same slice of a problem with other heads: the wrong size.
  pass.reset(s.p, s.t0, s.t1, s.view());
  pass.output(s.h_in.ptr(), r.o.ptr(), nullptr);
  pass.release(Keep::replay);
  GdnProblem fewer = s.p;
  fewer.Hv = fewer.Hk = 1;
  pass.reset(fewer, s.t0, s.t1, s.view());
  CHECK_THROWS_WITH(pass.output_from_states(r.o.ptr(), nullptr),
                    Catch::Contains("the kept states hold 2304 elements, but B = 1, Hv = 1"));
}

namespace {

// GdnContextParallel on one rank: forward (released for recomputation and run again when
// `recompute`), then backward. `change` alters the inputs between the two forwards.
template <typename T>
struct CoreRun {
  Tensor<T> o, ht;
  Grads<T> grads;
  int pieces = 1;
};

template <typename T, typename Change>
CoreRun<T> run_core(const GdnProblem& p, GdnInputs<T>& d, const Tensor<T>& dO, const Tensor<T>& dht,
                    int S, bool recompute, Change change) {
  CoreRun<T> r{Tensor<T>(output_shape(p)), Tensor<T>(state_shape(p)), Grads<T>(p, true)};
  SingleCommunicator comm;
  CpOptions opt;
  opt.split_pieces = S;
  const CpContext cp = CpContext::contiguous(comm, p.T, opt);
  GdnContextParallel<T, Host> core;
  core.forward(cp, p, d.view(), r.o.ptr(), r.ht.ptr());
  if (recompute) {
    core.release(Keep::replay);
    change(d);
    Tensor<T> o(output_shape(p)), ht(state_shape(p));
    core.forward(cp, p, d.view(), o.ptr(), ht.ptr());
    r.o = o;
    r.ht = ht;
  }
  GdnGradView<T> g = r.grads.view();
  core.backward(cp, dO.ptr(), dht.ptr(), g);
  r.pieces = core.piece_split().pieces;
  return r;
}

template <typename T>
void check_core_replay(int S) {
  GdnProblem p = packed_problem();
  p.l2norm_qk = true;  // the replay normalises q, k again for the pass
  GdnInputs<double> d64 = random_gdn_inputs<double>(p, 81, /*with_h0=*/true, 0.05);
  GdnInputs<T> d{cast<T>(d64.q), cast<T>(d64.k),    cast<T>(d64.v),
                 cast<T>(d64.g), cast<T>(d64.beta), cast<T>(d64.h0)};
  const Tensor<T> dO = cast<T>(random_tensor<double>(output_shape(p), 82));
  const Tensor<T> dht = cast<T>(random_tensor<double>(state_shape(p), 83));
  auto same = [](GdnInputs<T>&) {};
  const CoreRun<T> want = run_core(p, d, dO, dht, S, false, same);
  const CoreRun<T> got = run_core(p, d, dO, dht, S, true, same);
  CHECK(got.pieces == S);
  CHECK(bit_difference(got.o, want.o) == "");
  CHECK(bit_difference(got.ht, want.ht) == "");
  const auto g = got.grads.named(), w = want.grads.named();
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO(g[i].first);
    CHECK(bit_difference(*g[i].second, *w[i].second) == "");
  }
  // The replay takes its outputs from the kept states: changing v in the first chunk of
  // sequence 2 (tokens 37-52) between the two forwards leaves the rest of the sequence
  // (tokens 53-149) as it was, which the three phases again would not.
  auto change = [&](GdnInputs<T>& x) {
    for (std::int64_t i = 37 * p.Hv * p.V; i < 53 * p.Hv * p.V; ++i) x.v.data[i] += T(0.5);
  };
  GdnInputs<T> d2 = d;
  const CoreRun<T> changed = run_core(p, d2, dO, dht, S, true, change);
  CHECK(same_token_rows(changed.o, want.o, 53, 150));
  CHECK(!same_token_rows(changed.o, want.o, 37, 53));
  GdnInputs<T> d3 = d;
  change(d3);
  const CoreRun<T> rerun = run_core(p, d3, dO, dht, S, false, same);
  CHECK(!same_token_rows(rerun.o, want.o, 53, 150));
}

}  // namespace

TEST_CASE("GdnContextParallel on one rank: the recomputed forward and backward, same bits",
          "[recompute]") {
  for (int S : {1, 3}) {
    INFO("S=" << S);
    check_core_replay<double>(S);
    check_core_replay<float>(S);
  }
}

// The call order of docs/design.md §6c, written out as data: from each stage, each call
// either moves to the stage given or is refused.
TEST_CASE("Lifecycle follows the table of design.md §6c", "[recompute]") {
  using S = Lifecycle::Stage;
  enum Call { forward, backward, release_nothing, release_replay };
  struct Row {
    S from;
    Call call;
    bool legal;
    S to;
    bool replay;  // forward only: a recomputation
  };
  const Row table[] = {
      {S::empty, forward, true, S::forwarded, false},
      {S::empty, backward, false, S::empty, false},
      {S::empty, release_nothing, true, S::empty, false},
      {S::empty, release_replay, true, S::empty, false},
      {S::forwarded, forward, true, S::forwarded, false},
      {S::forwarded, backward, true, S::forwarded, false},
      {S::forwarded, release_nothing, true, S::empty, false},
      {S::forwarded, release_replay, true, S::replayable, false},
      {S::replayable, forward, true, S::forwarded, true},
      {S::replayable, backward, false, S::replayable, false},
      {S::replayable, release_nothing, true, S::empty, false},
      {S::replayable, release_replay, true, S::replayable, false},
  };
  // The shortest way to each stage from a new Lifecycle.
  auto reach = [](Lifecycle& l, S s) {
    if (s == S::empty) return;
    l.forward();
    if (s == S::replayable) l.release(Keep::replay);
  };
  const Row row = GENERATE_REF(from_range(std::begin(table), std::end(table)));
  DYNAMIC_SECTION("from " << int(row.from) << ", call " << int(row.call)) {
    Lifecycle l("model.layers.7.linear_attn");
    reach(l, row.from);
    REQUIRE(l.stage() == row.from);
    switch (row.call) {
      case forward:
        CHECK(l.forward() == row.replay);
        break;
      case backward:
        if (row.legal)
          CHECK_NOTHROW(l.backward());
        else
          CHECK_THROWS_WITH(l.backward(),
                            Catch::StartsWith("model.layers.7.linear_attn: backward called when"));
        break;
      case release_nothing:
        l.release(Keep::nothing);
        break;
      case release_replay:
        l.release(Keep::replay);
        break;
    }
    CHECK(l.stage() == row.to);
  }
}

TEST_CASE("GdnContextParallel refuses a backward out of order, and replays only when told",
          "[recompute]") {
  GdnProblem p = packed_problem();
  GdnInputs<double> d = random_gdn_inputs<double>(p, 91, /*with_h0=*/true, 0.05);
  const Tensor<double> dO = random_tensor<double>(output_shape(p), 92);
  SingleCommunicator comm;
  const CpContext cp = CpContext::contiguous(comm, p.T, CpOptions{});
  Tensor<double> o(output_shape(p)), again(output_shape(p));
  Grads<double> grads(p, true);
  GdnGradView<double> g = grads.view();
  GdnContextParallel<double, Host> core;
  CHECK_THROWS_WITH(core.backward(cp, dO.ptr(), nullptr, g),
                    Catch::Contains("nothing is kept (no forward since the last release)"));
  core.forward(cp, p, d.view(), o.ptr(), nullptr);
  core.release(Keep::replay);
  CHECK_THROWS_WITH(core.backward(cp, dO.ptr(), nullptr, g),
                    Catch::Contains("run the recomputing forward first"));
  // After Keep::nothing the next forward is a fresh one: changed inputs change every
  // later output of the sequence (a replay would take them from the kept states).
  core.forward(cp, p, d.view(), o.ptr(), nullptr);
  core.release(Keep::nothing);
  for (std::int64_t i = 37 * p.Hv * p.V; i < 53 * p.Hv * p.V; ++i) d.v.data[i] += 0.5;
  core.forward(cp, p, d.view(), again.ptr(), nullptr);
  CHECK(!same_token_rows(again, o, 53, 150));
  CHECK_NOTHROW(core.backward(cp, dO.ptr(), nullptr, g));
}
