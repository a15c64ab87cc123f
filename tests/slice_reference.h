// One slice [t0, t1) of a test case with seeded inputs, cotangents, entry state and exit
// adjoint, and every phase of LocalPass<double, Host> run on it: the reference that the
// tests of the CUDA passes compare with (test_cuda_gdn on a GPU, test_chunk_kernel's
// emulation of the CUDA order of operations on the CPU).
#pragma once

#include <cstdint>

#include "gdn/pass/local_pass.h"
#include "gdn/random_inputs.h"
#include "test_support.h"

namespace gdn::test {

struct SliceReference {
  GdnInputs<double> d;                   // the whole problem's inputs (h0 is global)
  Tensor<double> q, k, v, g, beta;       // the slice's tokens of them
  Tensor<double> dO, dht, h_in, lambda;  // cotangents, entry state, exit adjoint
  const double* dht_p;                   // dht where the case gives one, else null
  GdnProblem lp;                         // the problem with T = the slice's tokens
  Tensor<double> M, U, o, ht, D;         // the host phases' results
  Grads<double> gr;

  // seed draws the inputs; seed + 1 .. seed + 4 draw dO, dht, h_in and lambda.
  SliceReference(const Case& c, std::int64_t t0, std::int64_t t1, std::uint64_t seed)
      : d(random_gdn_inputs<double>(c.p, seed, c.h0, /*g_scale=*/0.1)),
        q(token_slice(d.q, t0, t1)),
        k(token_slice(d.k, t0, t1)),
        v(token_slice(d.v, t0, t1)),
        g(token_slice(d.g, t0, t1)),
        beta(token_slice(d.beta, t0, t1)),
        dO(random_tensor<double>(local_shape(c.p, t1 - t0), seed + 1)),
        dht(random_tensor<double>(state_shape(c.p), seed + 2)),
        h_in(random_tensor<double>(bh_state(c.p), seed + 3)),
        lambda(random_tensor<double>(bh_state(c.p), seed + 4)),
        dht_p(c.dht ? dht.ptr() : nullptr),
        lp(slice_problem(c.p, t1 - t0)),
        M({c.p.B, c.p.Hv, c.p.K, c.p.K}),
        U(bh_state(c.p)),
        o(local_shape(c.p, t1 - t0)),
        ht(state_shape(c.p)),
        D(bh_state(c.p)),
        gr(lp, false) {
    gr.dh0 = Tensor<double>(c.h0 ? state_shape(c.p) : Shape{0});
    LocalPass<double, Host> cpu(c.p, t0, t1, in(c));
    GdnGradView<double> gv = gr.view();
    cpu.prepare();
    cpu.transition(M.ptr(), U.ptr());
    cpu.output(h_in.ptr(), o.ptr(), ht.ptr());
    cpu.adjoint(dO.ptr(), dht_p, D.ptr());
    cpu.backward(lambda.ptr(), dO.ptr(), dht_p, gv);
  }

  GdnInputView<double> in(const Case& c) const {
    return {q.ptr(), k.ptr(), v.ptr(), g.ptr(), beta.ptr(), c.h0 ? d.h0.ptr() : nullptr};
  }

  static Shape local_shape(const GdnProblem& p, std::int64_t Tl) { return {p.B, Tl, p.Hv, p.V}; }
  static Shape bh_state(const GdnProblem& p) { return {p.B, p.Hv, p.K, p.V}; }
  static GdnProblem slice_problem(GdnProblem p, std::int64_t Tl) {
    p.T = Tl;  // Grads shapes the slice's gradients
    return p;
  }
};

}  // namespace gdn::test
