// Seeded GDN inputs in the value ranges the layer produces (docs/design.md §5):
// g = -exp(A) softplus(.) <= 0, beta = sigmoid(.) in (0, 1), keys of norm about one.
// Used by the tests, the benchmark and the demo; the same seed gives the same tensors.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/rng.h"
#include "core/tensor.h"
#include "gdn/problem.h"

namespace gdn {

template <typename T>
struct GdnInputs {
  Tensor<T> q, k, v, g, beta, h0;  // h0 empty when not requested

  GdnInputView<T> view() const {
    return {q.ptr(), k.ptr(), v.ptr(), g.ptr(), beta.ptr(), h0.empty() ? nullptr : h0.ptr()};
  }
};

// g_scale < 1 slows the decay (mean g is about -0.24 g_scale per token), so the state
// reaches further: CP tests need it to cross rank boundaries with real weight.
template <typename T>
GdnInputs<T> random_gdn_inputs(const GdnProblem& p, std::uint64_t seed, bool with_h0,
                               double g_scale = 1.0) {
  Rng rng(seed);
  GdnInputs<T> d;
  const std::int64_t B = p.B, Tn = p.T;
  auto fill = [&](Tensor<T>& t, Shape s, auto gen) {
    t = Tensor<T>(std::move(s));
    for (T& x : t.data) x = T(gen());
  };
  const double kscale = 1.0 / std::sqrt(double(p.K));
  fill(d.q, {B, Tn, p.Hk, p.K}, [&] { return rng.normal() * kscale; });
  fill(d.k, {B, Tn, p.Hk, p.K}, [&] { return rng.normal() * kscale; });
  fill(d.v, {B, Tn, p.Hv, p.V}, [&] { return rng.normal(); });
  fill(d.g, {B, Tn, p.Hv}, [&] { return -std::log1p(std::exp(rng.normal())) * 0.3 * g_scale; });
  fill(d.beta, {B, Tn, p.Hv}, [&] { return 1.0 / (1.0 + std::exp(-rng.normal())); });
  if (with_h0) fill(d.h0, {p.num_sequences(), p.Hv, p.K, p.V}, [&] { return 0.5 * rng.normal(); });
  return d;
}

}  // namespace gdn
