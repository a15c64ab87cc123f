// The reference of the GDN benchmarks' check column (common/bench_table.h): the op in fp64
// on the same inputs, by the token-by-token recurrence (gdn/recurrent.h) or, where that is
// too slow, the chunked op in fp64; and the rel L2 errors of a run's host outputs and
// gradients against it. gdn_bench and gdn_split_bench share it.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/bench_table.h"
#include "core/dtype.h"
#include "gdn/op/op.h"
#include "gdn/recurrent.h"

namespace gdn::app {

// The first columns of gdn_bench's and gdn_split_bench's tables, the shape (B, T, Hk, Hv,
// K, V), then `more`; shape_cells: a row's cells for them.
inline std::vector<BenchColumn> shape_columns(const std::vector<BenchColumn>& more) {
  std::vector<BenchColumn> c{{"B", "", 3},  {"T", "", 7}, {"Hk", "", 3},
                             {"Hv", "", 3}, {"K", "", 4}, {"V", "", 4}};
  c.insert(c.end(), more.begin(), more.end());
  return c;
}
// The table of gdn_bench and gdn_split_bench: the shape's columns, `what` (the variant's),
// the timing both print (the median and the minimum in ms, tokens per second), then
// `derived`; its header printed. None with --json (the rows go out as JSON lines instead).
inline std::optional<BenchTable> open_shape_table(bool json, const std::vector<BenchColumn>& what,
                                                  const std::vector<BenchColumn>& derived) {
  std::optional<BenchTable> table;
  if (json) return table;
  std::vector<BenchColumn> c = what;
  c.insert(c.end(), {{"time", "(ms)", 10}, {"min", "(ms)", 10}, {"tokens", "(M/s)", 9}});
  c.insert(c.end(), derived.begin(), derived.end());
  table.emplace(shape_columns(c));
  table->header();
  return table;
}
// The check's tolerance of a row against the fp64 reference: 1e-10 in fp64, 1e-4 else.
inline double check_tolerance(DType d) {
  return d == DType::f64 ? 1e-10 : 1e-4;
}
inline std::vector<std::string> shape_cells(const GdnProblem& p,
                                            const std::vector<std::string>& more) {
  std::vector<std::string> c{std::to_string(p.B),  std::to_string(p.T), std::to_string(p.Hk),
                             std::to_string(p.Hv), std::to_string(p.K), std::to_string(p.V)};
  c.insert(c.end(), more.begin(), more.end());
  return c;
}

// o, ht and the gradients of sum(o dO) + sum(ht dht) with respect to every input, h0 too.
struct GdnReference {
  std::vector<double> o, ht, dq, dk, dv, dg, dbeta, dh0;
};

// The reference of p on `in` with its h0 replaced by `h0` (never null), by the recurrence
// or (`recurrence` false) the chunked op.
template <typename T>
GdnReference gdn_reference(const GdnProblem& p, const GdnInputView<T>& in, const T* h0, const T* dO,
                           const T* dht, bool recurrence) {
  const std::size_t nq = std::size_t(p.B) * p.T * p.Hk * p.K,
                    nv = std::size_t(p.B) * p.T * p.Hv * p.V, ng = std::size_t(p.B) * p.T * p.Hv,
                    ns = std::size_t(p.num_sequences()) * p.Hv * p.K * p.V;
  auto wide = [](const T* x, std::size_t n) { return std::vector<double>(x, x + n); };
  const std::vector<double> q = wide(in.q, nq), k = wide(in.k, nq), v = wide(in.v, nv),
                            g = wide(in.g, ng), beta = wide(in.beta, ng), h = wide(h0, ns),
                            o_bar = wide(dO, nv), ht_bar = wide(dht, ns);
  const GdnInputView<double> view{q.data(), k.data(), v.data(), g.data(), beta.data(), h.data()};
  GdnReference r{std::vector<double>(nv), std::vector<double>(ns), std::vector<double>(nq),
                 std::vector<double>(nq), std::vector<double>(nv), std::vector<double>(ng),
                 std::vector<double>(ng), std::vector<double>(ns)};
  GdnGradView<double> grads{r.dq.data(), r.dk.data(),    r.dv.data(),
                            r.dg.data(), r.dbeta.data(), r.dh0.data()};
  if (recurrence) {
    recurrent_forward(p, view, r.o.data(), r.ht.data());
    recurrent_backward(p, view, o_bar.data(), ht_bar.data(), grads);
  } else {
    ChunkedGdn<double> op(p, view);
    op.forward(r.o.data(), r.ht.data());
    op.backward(o_bar.data(), ht_bar.data(), grads);
  }
  return r;
}

// rel L2 of host values against the reference's; the largest of several.
template <typename T>
double ref_error(const T* got, const std::vector<double>& ref) {
  return rel_l2_error(got, ref.data(), ref.size());
}
inline double worst(std::initializer_list<double> errors) {
  return *std::max_element(errors.begin(), errors.end());
}
template <typename T>
double outputs_error(const GdnReference& r, const T* o, const T* ht) {
  return worst({ref_error(o, r.o), ref_error(ht, r.ht)});
}
// dh0 only where the op writes it (a slice that continues its sequences does not).
template <typename T>
double grads_error(const GdnReference& r, const GdnGradView<T>& g, bool dh0) {
  return worst({ref_error(g.dq, r.dq), ref_error(g.dk, r.dk), ref_error(g.dv, r.dv),
                ref_error(g.dg, r.dg), ref_error(g.dbeta, r.dbeta),
                dh0 ? ref_error(g.dh0, r.dh0) : 0.0});
}

}  // namespace gdn::app
