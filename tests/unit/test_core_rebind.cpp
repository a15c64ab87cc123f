// The CP cores' backward after their inputs moved (GdnLayerCore::rebind,
// AttentionContextParallel::rebind): the bf16 mode keeps a layer's q, k, v, beta (GDN) and
// q, o (attention) in bf16, frees the GDN core's normalised q, k (release_inputs) and
// hands the backward decoded copies. The backward must then give the same bits as one
// that reads the forward's own buffers: the GDN core on one core (split into pieces or
// not) and per row with packed documents; attention in and out of the bf16 mode (which
// keeps its gathered K, V in bf16). The forward's buffers are poisoned (NaN) before the
// backward, so a pass or piece still reading them shows; without the rebind the gradients
// do change, so the poison reaches what the backward reads.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "comm/single_communicator.h"
#include "core/bf16.h"
#include "core/precision.h"
#include "core/rng.h"
#include "cp/attention_cp.h"
#include "cp/gdn_layer_core.h"
#include "gdn/random_inputs.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

template <typename T>
void poison(GdnInputs<T>& d) {
  for (Tensor<T>* t : {&d.q, &d.k, &d.v, &d.g, &d.beta})
    std::fill(t->data.begin(), t->data.end(), std::numeric_limits<T>::quiet_NaN());
}

enum class Move { none, rebind, poison_only };

// One forward and backward of a GdnLayerCore on one rank; `move` says what happens to the
// inputs in between. Returns the gradients.
template <typename T>
Grads<T> run(const GdnProblem& p, const Documents* docs, int S, const GdnInputs<T>& inputs,
             const Tensor<T>& dO, Move move) {
  SingleCommunicator comm;
  CpOptions opt;
  opt.split_pieces = S;
  CpContext cp = CpContext::contiguous(comm, p.T, opt);
  cp.documents = docs;
  GdnInputs<T> d = inputs;
  Tensor<T> o(output_shape(p));
  GdnLayerCore<T, Host> core;
  core.forward(cp, p, d.view(), o.ptr());
  GdnInputs<T> moved = d;
  if (move == Move::rebind) core.release_inputs();
  if (move != Move::none) poison(d);
  if (move == Move::rebind) core.rebind(moved.view());
  Grads<T> g(p, false);
  GdnGradView<T> gv = g.view();
  core.backward(cp, dO.ptr(), gv);
  return g;
}

template <typename T>
void check_rebind(const Documents* docs, int S) {
  GdnProblem p = make_problem(2, 150, 1, 2, 8, 8, 16);
  p.l2norm_qk = true;
  const GdnInputs<double> d64 = random_gdn_inputs<double>(p, 31, /*with_h0=*/false, 0.05);
  const GdnInputs<T> d{cast<T>(d64.q), cast<T>(d64.k),    cast<T>(d64.v),
                       cast<T>(d64.g), cast<T>(d64.beta), {}};
  const Tensor<T> dO = cast<T>(random_tensor<double>(output_shape(p), 32));
  const Grads<T> want = run(p, docs, S, d, dO, Move::none);
  const Grads<T> got = run(p, docs, S, d, dO, Move::rebind);
  const Grads<T> stale = run(p, docs, S, d, dO, Move::poison_only);
  const auto g = got.named(), w = want.named(), s = stale.named();
  bool poison_shows = false;
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO(g[i].first);
    CHECK(bit_difference(*g[i].second, *w[i].second) == "");
    poison_shows = poison_shows || bit_difference(*s[i].second, *w[i].second) != "";
  }
  CHECK(poison_shows);
}

}  // namespace

TEST_CASE("GdnLayerCore::rebind: the backward from moved inputs, same bits", "[rebind]") {
  const Documents docs({{0, 37, 90, 150}, {0, 150}}, 150);
  for (int S : {1, 3}) {
    INFO("S=" << S);
    check_rebind<double>(nullptr, S);
    check_rebind<float>(nullptr, S);
    INFO("packed documents, one core per row");
    check_rebind<double>(&docs, S);
    check_rebind<float>(&docs, S);
  }
}

namespace {

// q, o [B, T, Hq, D], k, v [B, T, Hkv, D], dO: bf16 values (as the bf16 mode makes them).
struct AttentionCase {
  AttentionDims d{2, 4, 2, 16, 0.25};
  std::int64_t T = 70;
  std::vector<float> q, k, v, dO;
  AttentionCase() {
    Rng rng(5);
    auto fill = [&](std::vector<float>& x, std::int64_t width) {
      x.resize(std::size_t(d.B * T * width));
      for (float& e : x) e = round_bf16(float(rng.normal()));
    };
    fill(q, std::int64_t(d.Hq) * d.D);
    fill(k, std::int64_t(d.Hkv) * d.D);
    fill(v, std::int64_t(d.Hkv) * d.D);
    fill(dO, std::int64_t(d.Hq) * d.D);
  }
};

std::vector<std::vector<float>> run_attention(const AttentionCase& c, bool bf16, Move move) {
  AttentionDims d = c.d;
  d.precision = precision_of(bf16);
  SingleCommunicator comm;
  const CpContext cp = CpContext::contiguous(comm, c.T);
  std::vector<float> q = c.q, o(c.q.size()), dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  AttentionContextParallel<float, Host> core;
  core.forward(cp, d, q.data(), c.k.data(), c.v.data(), o.data());
  const std::vector<float> q2 = q, o2 = o;
  if (move != Move::none)
    for (std::vector<float>* x : {&q, &o})
      std::fill(x->begin(), x->end(), std::numeric_limits<float>::quiet_NaN());
  if (move == Move::rebind) core.rebind(q2.data(), o2.data());
  core.backward(cp, c.dO.data(), dq.data(), dk.data(), dv.data());
  return {o2, dq, dk, dv};
}

}  // namespace

TEST_CASE("AttentionContextParallel::rebind: the backward from moved q and o, same bits",
          "[rebind]") {
  const AttentionCase c;
  // The inputs are bf16 values, so keeping K, V in bf16 loses nothing: the bf16 mode's
  // results are the float mode's.
  const auto plain = run_attention(c, false, Move::none);
  const auto kept = run_attention(c, true, Move::none);
  for (std::size_t i = 0; i < plain.size(); ++i) CHECK(bit_difference(kept[i], plain[i]) == "");
  for (bool bf16 : {false, true}) {
    INFO((bf16 ? "bf16 mode" : "float mode"));
    const auto want = run_attention(c, bf16, Move::none);
    const auto got = run_attention(c, bf16, Move::rebind);
    const auto stale = run_attention(c, bf16, Move::poison_only);
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO("output " << i << " of o, dq, dk, dv");
      CHECK(bit_difference(got[i], want[i]) == "");
    }
    CHECK(bit_difference(stale[1], want[1]) != "");
  }
}
