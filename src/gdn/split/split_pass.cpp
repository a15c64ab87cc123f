#include "gdn/split/split_pass.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "gdn/split/split_jobs.h"
#include "gdn/split/split_scan.h"

namespace gdn {

namespace {

// Phase 1 costs each piece about 60% more than the unsplit pass's work per token (the
// WY factors and the transition, whose walk carries K + V columns, on top of the
// output; gdn_split_bench at B Hv = 1, 2 threads: S = 2 runs the forward 1.1-1.3x and
// forward + backward 1.2-1.3x faster, docs/design.md §4b).
constexpr double kPhaseOneOverhead = 0.6;

template <typename T>
T* offset(T* p, std::int64_t n) {
  return p ? p + n : nullptr;
}

}  // namespace

PieceSplit choose_piece_split(PieceSplit asked, const GdnProblem& p, std::int64_t t0,
                              std::int64_t t1, int threads) {
  PieceSplit split{1, asked.log_depth};
  if (asked.pieces >= 1) {
    split.pieces = asked.pieces;
    return split;
  }
  if (std::int64_t(p.B) * p.Hv >= threads) return split;
  // One round of B * S jobs over the threads, each job Hv heads of one piece.
  const std::int64_t chunks = std::int64_t(SliceLayout(p, t0, t1).chunks.size());
  const int S = int(std::min<std::int64_t>(threads / p.B, chunks / kMinChunksPerPiece));
  if (S >= 2 && p.Hv * (1 + kPhaseOneOverhead) <= 0.9 * S) split.pieces = S;
  return split;
}

std::vector<std::int64_t> split_points(const SliceLayout& layout, int S) {
  const std::int64_t n = std::int64_t(layout.chunks.size());
  const std::int64_t pieces = std::clamp<std::int64_t>(S, 1, std::max<std::int64_t>(n, 1));
  std::vector<std::int64_t> b{0};
  for (std::int64_t i = 1; i < pieces; ++i) b.push_back(layout.chunks[i * n / pieces].begin);
  b.push_back(layout.tokens());
  return b;
}

template <typename T>
void SplitLocalPass<T>::reset(const GdnProblem& p, std::int64_t t0, std::int64_t t1,
                              const GdnInputView<T>& in, PieceSplit split) {
  p_ = p;
  t0_ = t0;
  t1_ = t1;
  split_ = split;
  in_ = in;
  have_D_ = false;
  const SliceLayout layout(p, t0, t1);
  last_ends_ = !layout.segments.empty() && layout.segments.back().ends;
  bounds_ = split_points(layout, split.pieces);
  const int S = pieces();
  if (S == 1) {
    whole_.reset(p, t0, t1, in);
    return;
  }
  // Each piece of each batch row is a B = 1 problem over the same sequence: its tokens,
  // rows of h0 and every state are contiguous (packed sequences already have B = 1).
  GdnProblem row = p;
  row.B = 1;
  passes_.resize(std::size_t(S) * p.B);
  for (int s = 0; s < S; ++s)
    for (int b = 0; b < p.B; ++b)
      piece(s, b).reset(row, t0 + bounds_[s], t0 + bounds_[s + 1], piece_view(in, s, b));
  dims_ = {p.B * p.Hv, p.K, p.V};
  pairs_.resize(std::size_t(S) * dims_.pair_elems());
  D_.resize(std::size_t(S) * dims_.b_elems());
  carried_.resize(std::size_t(S) * dims_.b_elems());
  prepared_.assign(S, 0);
  have_pair_.assign(S, 0);
}

template <typename T>
GdnInputView<T> SplitLocalPass<T>::piece_view(const GdnInputView<T>& in, int s, int b) const {
  const std::int64_t qk = std::int64_t(p_.Hk) * p_.K, v = std::int64_t(p_.Hv) * p_.V, gh = p_.Hv;
  const std::int64_t t = token_row(s, b);
  return {in.q + t * qk, in.k + t * qk,    in.v + t * v,
          in.g + t * gh, in.beta + t * gh, offset(in.h0, state_row(b))};
}

template <typename T>
void SplitLocalPass<T>::rebind(const GdnInputView<T>& in) {
  in_ = in;
  if (pieces() == 1) {
    whole_.rebind(in);
    return;
  }
  for (int s = 0; s < pieces(); ++s)
    for (int b = 0; b < p_.B; ++b) piece(s, b).rebind(piece_view(in, s, b));
}

template <typename T>
template <typename F>
void SplitLocalPass<T>::run(const std::vector<int>& list, F&& job) {
  const int B = p_.B;
  for_each_job(int(list.size()) * B, [&](int j) { job(list[j / B], j % B); });
}

template <typename T>
void SplitLocalPass<T>::phase_one(const std::vector<char>& pair, const std::vector<char>& prep,
                                  const std::vector<char>& adj, const T* dO, const T* dht) {
  const int S = pieces();
  std::vector<char> want_pair(S), want_prep(S), want_adj(adj);
  // Pieces with the most work first: the dynamic schedule then balances the rest.
  std::vector<int> heavy, light;
  for (int s = 0; s < S; ++s) {
    want_pair[s] = pair[s] && !have_pair_[s];
    want_prep[s] = (prep[s] || pair[s] || adj[s]) && !prepared_[s];
    if (want_pair[s] || want_adj[s])
      heavy.push_back(s);
    else if (want_prep[s])
      light.push_back(s);
  }
  heavy.insert(heavy.end(), light.begin(), light.end());
  if (heavy.empty()) return;
  run(heavy, [&](int s, int b) {
    Pass& lp = piece(s, b);
    if (want_prep[s]) lp.prepare();
    if (want_pair[s]) lp.transition(M_of(s) + kk_row(b), U_of(s) + kv_row(b));
    if (want_adj[s])
      lp.adjoint(dO + token_row(s, b) * p_.Hv * p_.V, offset(dht, state_row(b)),
                 D_of(s) + kv_row(b));
  });
  for (int s = 0; s < S; ++s) {
    prepared_[s] |= want_prep[s];
    have_pair_[s] |= want_pair[s];
  }
}

template <typename T>
void SplitLocalPass<T>::prepare() {
  if (pieces() == 1) return whole_.prepare();
  const int S = pieces();
  phase_one(std::vector<char>(S, 0), std::vector<char>(S, 1), std::vector<char>(S, 0), nullptr,
            nullptr);
}

template <typename T>
void SplitLocalPass<T>::transition(T* M, T* U) {
  if (pieces() == 1) return whole_.transition(M, U);
  const int S = pieces();
  GDN_CHECK(std::all_of(prepared_.begin(), prepared_.end(), [](char c) { return c; }),
            "SplitLocalPass::transition called before prepare()");
  phase_one(std::vector<char>(S, 1), std::vector<char>(S, 0), std::vector<char>(S, 0), nullptr,
            nullptr);
  // The slice's map: the pieces' maps composed in order.
  PiecePairs<T> f;
  for (int s = 0; s < S; ++s) {
    f.A.push_back(M_of(s));
    f.B.push_back(U_of(s));
  }
  fold_pieces(f, dims_, split_.log_depth, M, U);
}

template <typename T>
void SplitLocalPass<T>::output(const T* h_in, T* o, T* ht) {
  if (pieces() == 1) return whole_.output(h_in, o, ht);
  const int S = pieces();
  have_D_ = false;
  // Phase 1: the pairs of pieces 0 .. S-2 (the last piece's exit state enters nothing);
  // the last piece prepares its factors meanwhile, so the output jobs are all alike.
  std::vector<char> pair(S, 1), prep(S, 1);
  pair[S - 1] = 0;
  phase_one(pair, prep, std::vector<char>(S, 0), nullptr, nullptr);
  // Phase 2: piece s + 1 enters at f_s(... f_0(h_in)).
  PiecePairs<T> f;
  std::vector<T*> entry;
  for (int s = 0; s + 1 < S; ++s) {
    f.A.push_back(M_of(s));
    f.B.push_back(U_of(s));
    entry.push_back(carried_of(s + 1));
  }
  scan_pieces(f, dims_, split_.log_depth, h_in, entry);
  // Phase 3: every piece from its true entry state.
  std::vector<int> all(S);
  for (int s = 0; s < S; ++s) all[s] = s;
  run(all, [&](int s, int b) {
    const T* h = s == 0 ? offset(h_in, kv_row(b)) : carried_of(s) + kv_row(b);
    piece(s, b).output(h, o + token_row(s, b) * p_.Hv * p_.V, offset(ht, state_row(b)));
  });
}

template <typename T>
void SplitLocalPass<T>::output_from_states(T* o, T* ht) {
  if (pieces() == 1) return whole_.output_from_states(o, ht);
  have_D_ = false;
  // No phases 1-2: each piece's kept states start from its true entry state already.
  std::vector<int> all(pieces());
  for (int s = 0; s < pieces(); ++s) all[s] = s;
  run(all, [&](int s, int b) {
    piece(s, b).output_from_states(o + token_row(s, b) * p_.Hv * p_.V, offset(ht, state_row(b)));
  });
}

template <typename T>
void SplitLocalPass<T>::adjoint(const T* dO, const T* dht, T* D) {
  if (pieces() == 1) return whole_.adjoint(dO, dht, D);
  const int S = pieces();
  GDN_CHECK(std::all_of(prepared_.begin(), prepared_.end(), [](char c) { return c; }),
            "SplitLocalPass::adjoint called before prepare()");
  // Phase 1: every piece's D_s, and the M_s the reverse scan needs.
  phase_one(std::vector<char>(S, 1), std::vector<char>(S, 0), std::vector<char>(S, 1), dO, dht);
  have_D_ = true;
  D_dO_ = dO;
  D_dht_ = dht;
  // The slice's D = g_0(g_1(... g_{S-1}(0))), g_s(y) = M_s^T y + D_s.
  PiecePairs<T> g;
  g.transpose = true;
  std::vector<T*> out;
  for (int s = S - 1; s >= 0; --s) {
    g.A.push_back(M_of(s));
    g.B.push_back(D_of(s));
    out.push_back(carried_of(s));
  }
  scan_pieces(g, dims_, split_.log_depth, static_cast<const T*>(nullptr), out);
  std::copy_n(carried_of(0), dims_.b_elems(), D);
}

template <typename T>
void SplitLocalPass<T>::backward(const T* lambda, const T* dO, const T* dht, GdnGradView<T>& g) {
  if (pieces() == 1) return whole_.backward(lambda, dO, dht, g);
  const int S = pieces();
  // LocalPass ignores lambda where the slice's last sequence ends inside it (dht is that
  // exit's adjoint); the scan would carry M_{S-1}^T lambda, so drop it here too.
  if (last_ends_) lambda = nullptr;
  // Phase 1: D_s of pieces 1 .. S-1 (piece 0's exit adjoint needs D_1 .. D_{S-1} only),
  // and M_s of the pieces the reverse scan passes through: 1 .. S-1, or 1 .. S-2 from a
  // zero exit adjoint, whose first step M_{S-1}^T 0 + D_{S-1} is just D_{S-1}.
  if (!(have_D_ && D_dO_ == dO && D_dht_ == dht)) {
    std::vector<char> pair(S, 1), adj(S, 1);
    pair[0] = adj[0] = 0;
    if (!lambda) pair[S - 1] = 0;
    phase_one(pair, std::vector<char>(S, 0), adj, dO, dht);
  }
  have_D_ = false;
  // Phase 2: piece s - 1 leaves with g_s(... g_{S-1}(lambda)), g_s(y) = M_s^T y + D_s.
  PiecePairs<T> f;
  f.transpose = true;
  std::vector<T*> exit;
  const T* y_in = lambda;
  int top = S - 1;  // the first piece whose map the scan applies
  if (!lambda) {
    std::copy_n(D_of(S - 1), dims_.b_elems(), carried_of(S - 2));
    y_in = carried_of(S - 2);
    top = S - 2;
  }
  for (int s = top; s >= 1; --s) {
    f.A.push_back(M_of(s));
    f.B.push_back(D_of(s));
    exit.push_back(carried_of(s - 1));
  }
  scan_pieces(f, dims_, split_.log_depth, y_in, exit);
  // Phase 3: every piece's exact backward.
  std::vector<int> all(S);
  for (int s = 0; s < S; ++s) all[s] = s;
  const std::int64_t qk = std::int64_t(p_.Hk) * p_.K, v = std::int64_t(p_.Hv) * p_.V;
  run(all, [&](int s, int b) {
    const std::int64_t t = token_row(s, b);
    const T* y = s == S - 1 ? offset(lambda, kv_row(b)) : carried_of(s) + kv_row(b);
    GdnGradView<T> gp{offset(g.dq, t * qk),       offset(g.dk, t * qk),
                      offset(g.dv, t * v),        offset(g.dg, t * p_.Hv),
                      offset(g.dbeta, t * p_.Hv), offset(g.dh0, state_row(b))};
    piece(s, b).backward(y, dO + t * v, offset(dht, state_row(b)), gp);
  });
}

template class SplitLocalPass<float>;
template class SplitLocalPass<double>;

}  // namespace gdn
