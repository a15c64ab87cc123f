#include "cp/gdn_layer_core.h"

#include "core/error.h"
#include "gdn/split/split_pass.h"
#include "runtime/devices.h"

namespace gdn {

template <typename T, typename Dev>
void GdnLayerCore<T, Dev>::forward(const CpContext& cp, const GdnProblem& p,
                                   const GdnInputView<T>& in, T* o) {
  const std::size_t n = cp.documents ? std::size_t(p.B) : 1;
  GDN_CHECK(!cp.documents || (cp.documents->rows() == p.B && cp.documents->length() == p.T),
            "GdnLayerCore: documents of ", cp.documents ? cp.documents->rows() : 0,
            " rows for a batch of ", p.B, " rows");
  if (cores_.size() != n) {
    cores_.clear();
    for (std::size_t i = 0; i < n; ++i)
      cores_.push_back(std::make_unique<GdnContextParallel<T, Dev>>());
  }
  per_row_ = cp.documents != nullptr;
  if (!per_row_) {
    cores_[0]->forward(cp, p, in, o, nullptr);
    return;
  }
  // Row b as a packed problem of its own: its documents are the sequences.
  const std::int64_t Tl = cp.tokens();
  row_ = {Tl * p.Hk * p.K, Tl * p.Hv * p.V, Tl * p.Hv};
  GdnProblem row = p;
  row.B = 1;
  for (int b = 0; b < p.B; ++b) {
    row.cu_seqlens = cp.documents->row(b);
    cores_[std::size_t(b)]->forward(cp, row, row_view(in, b), o + b * row_.v, nullptr);
  }
}

template <typename T, typename Dev>
void GdnLayerCore<T, Dev>::rebind(const GdnInputView<T>& in) {
  if (!per_row_) {
    cores_[0]->rebind(in);
    return;
  }
  for (std::size_t b = 0; b < cores_.size(); ++b) cores_[b]->rebind(row_view(in, int(b)));
}

template <typename T, typename Dev>
void GdnLayerCore<T, Dev>::backward(const CpContext& cp, const T* d_o, GdnGradView<T>& g) {
  if (!per_row_) {
    cores_[0]->backward(cp, d_o, nullptr, g);
    return;
  }
  const auto [qk, vv, hh] = row_;
  for (std::size_t b = 0; b < cores_.size(); ++b) {
    const std::int64_t i = std::int64_t(b);
    GdnGradView<T> row{g.dq + i * qk, g.dk + i * qk,    g.dv + i * vv,
                       g.dg + i * hh, g.dbeta + i * hh, nullptr};
    cores_[b]->backward(cp, d_o + i * vv, nullptr, row);
  }
}

GdnCoreElems gdn_core_elems(const GdnProblem& p, int P, PairScan scan, int threads) {
  const std::int64_t N = std::int64_t(p.B) * p.T, qk = std::int64_t(p.Hk) * p.K;
  const std::int64_t B = p.B, Hv = p.Hv, K = p.K, V = p.V, C = p.chunk_size;
  const std::int64_t chunks = (p.T + C - 1) / C, factors = 1 + 3 * C * K + C * V + C * C;
  const std::int64_t states = B * Hv * chunks * K * V;
  const ScanCost pairs = scan_cost(scan, P, PairDims{int(B * Hv), int(K), int(V)}, 1);
  const bool split = choose_piece_split(PieceSplit{0, false}, p, 0, p.T, threads).pieces > 1;
  GdnCoreElems e;
  const std::int64_t entry = P > 1 ? B * Hv * K * V : 0;  // h_in, then lambda
  e.kept = 2 * N * qk + states + entry + pairs.kept;
  // The entry states (the recomputed forward makes the outputs from them) and what the
  // backward's scan reads from the forward stay.
  e.replayed = states + pairs.kept;
  // The WY factors while a layer runs; then the pair scan's scratch (phase 2) or, later, the
  // backward's dq, dk per value head (the host pass's G - 1 of each group; the CUDA pass's G).
  e.transient = (P > 1 || split ? B * Hv * chunks * factors : 0) +
                std::max(2 * std::int64_t(p.group()) * N * qk, pairs.transient);
  return e;
}

#define GDN_INSTANTIATE(T, Dev) template class GdnLayerCore<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
