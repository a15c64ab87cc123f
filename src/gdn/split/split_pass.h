// The intra-rank sequence split (docs/design.md §4b). When B * Hv, the number of
// independent recurrences, is below the thread count, the host passes (parallel over
// (batch, head), sequential over chunks) leave threads idle. SplitLocalPass cuts its
// slice into S pieces at chunk boundaries and runs each piece as a virtual rank, with
// the CP algebra of §3-4 inside the rank:
//   forward:  1. each piece from a zero state -> its pair (M_s, U_s), in parallel;
//             2. a scan of the pairs from the slice's entry state -> each piece's entry;
//             3. each piece's outputs from its true entry state, in parallel.
//   backward: 1. each piece's adjoint from a zero exit adjoint -> D_s, in parallel;
//             2. a reverse scan of (M_s^T, D_s) from the slice's exit adjoint;
//             3. each piece's exact backward from its entry state and exit adjoint.
// The scan is the serial correction chain or a Hillis-Steele scan (split_scan.h).
//
// It is a SlicePass (gdn/pass/slice_pass.h) on the slice [t0, t1) as a whole, as LocalPass
// is, so GdnContextParallel uses it in LocalPass's place on the host, at any P: at P > 1 the
// slice's own pair (transition) is the fold of the pieces' pairs and its D (adjoint)
// the reverse scan from zero. Each piece is one LocalPass per batch row (a B = 1 problem,
// so its tokens are contiguous), and those B x S passes are the parallel jobs
// (split_jobs.h); inside a job the LocalPass loops run on one thread. With S = 1 it is
// one LocalPass over the slice: the unsplit passes, bit for bit.
//
// Piece boundaries are chunk boundaries of the slice (split_points), so every piece
// chunks its tokens exactly as the whole slice does, and a piece that starts a packed
// sequence takes that sequence's h0 (its first segment starts) just as LocalPass's
// segments do. The results equal the unsplit ones up to rounding (about 1e-15 relative
// in fp64); for a fixed S they are bit-identical for any thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "gdn/pairs/pair_scan.h"
#include "gdn/pass/local_pass.h"
#include "gdn/problem.h"
#include "gdn/slice_layout.h"

namespace gdn {

// How a slice is split: S pieces (1: not split; 0 in a request: choose_piece_split decides)
// and the scan over them.
struct PieceSplit {
  int pieces = 1;
  bool log_depth = false;  // Hillis-Steele over the pieces instead of the serial chain
};

// Automatic splitting needs at least this many chunks per piece.
inline constexpr int kMinChunksPerPiece = 4;

// The split to run on the slice [t0, t1) with `threads` OpenMP threads when `asked` is
// requested (CpOptions::split_pieces and split_log_depth). asked.pieces >= 1 is taken as
// given (1: no split). 0 splits into
// S = threads / B pieces when B * Hv < threads, every piece gets kMinChunksPerPiece
// chunks, and the expected time (Hv heads per job, each piece paying about 60% more for
// its phase 1) is at most 0.9 of the unsplit pass's.
PieceSplit choose_piece_split(PieceSplit asked, const GdnProblem& p, std::int64_t t0,
                              std::int64_t t1, int threads);

// The S + 1 local token offsets of the pieces of a slice: 0, then the first token of
// chunks floor(i n / S) for i = 1 .. S - 1 (n chunks in the slice), then the slice's
// length. S is capped at n (at least 1), so no piece is empty.
std::vector<std::int64_t> split_points(const SliceLayout& layout, int S);

template <typename T>
class SplitLocalPass {
 public:
  // As LocalPass::reset, plus the split. The views must outlive the calls below.
  void reset(const GdnProblem& p, std::int64_t t0, std::int64_t t1, const GdnInputView<T>& in,
             PieceSplit split = {});

  // The same values at other addresses (LocalPass::rebind): every piece reads its part of
  // `in` from now on.
  void rebind(const GdnInputView<T>& in);

  std::int64_t tokens() const { return t1_ - t0_; }
  int pieces() const { return int(bounds_.size()) - 1; }
  // The pieces' local token offsets (pieces() + 1 of them).
  const std::vector<std::int64_t>& bounds() const { return bounds_; }

  // SlicePass's members on the whole slice (gdn/pass/slice_pass.h says what each does).
  void prepare();
  void transition(T* M, T* U);
  void output(const T* h_in, T* o, T* ht);
  // Every piece (or the whole slice, S = 1) from the chunk entry states its last output()
  // kept through release(Keep::replay). The next reset() must be on the same slice, inputs
  // and split, so that the pieces are the ones that kept them.
  void output_from_states(T* o, T* ht);
  void adjoint(const T* dO, const T* dht, T* D);
  // After adjoint() with the same dO and dht (unchanged), it reuses the pieces' D.
  void backward(const T* lambda, const T* dO, const T* dht, GdnGradView<T>& g);
  void release_factors() {
    whole_.release_factors();
    for (Pass& p : passes_) p.release_factors();
    prepared_.assign(prepared_.size(), 0);
  }
  // On every piece; the pieces' pairs and D_s go either way: the backward makes what it
  // needs of them again.
  void release(Keep keep) {
    whole_.release(keep);
    for (Pass& p : passes_) p.release(keep);
    if (keep == Keep::nothing) passes_ = std::vector<Pass>();
    for (std::vector<T>* b : {&pairs_, &D_, &carried_}) *b = std::vector<T>();
    prepared_.assign(prepared_.size(), 0);
    have_pair_.assign(have_pair_.size(), 0);
    have_D_ = false;
  }

 private:
  using Pass = LocalPass<T, Host>;
  Pass& piece(int s, int b) { return passes_[std::size_t(s) * p_.B + b]; }
  // Job j of a phase over the pieces in `list` is piece list[j / B], batch row j % B.
  template <typename F>
  void run(const std::vector<int>& list, F&& job);
  // Phase 1 of the forward and the backward, for each piece s that lacks it: prepare
  // where prep[s], pair[s] or adj[s]; the pair (M_s, U_s) where pair[s]; D_s where adj[s]
  // (from dO, dht). Pairs and factors are kept until reset().
  void phase_one(const std::vector<char>& pair, const std::vector<char>& prep,
                 const std::vector<char>& adj, const T* dO, const T* dht);

  // Where piece s, row b starts: its first token row in the slice's [B, tokens] rows,
  // and its rows of the [N, Hv, K, V] states (h0, ht, dht, dh0) and of [B, Hv, ...].
  std::int64_t token_row(int s, int b) const { return b * tokens() + bounds_[s]; }
  // Piece s, row b's part of the slice's inputs `in`.
  GdnInputView<T> piece_view(const GdnInputView<T>& in, int s, int b) const;
  std::int64_t state_row(int b) const {
    return p_.cu_seqlens.empty() ? std::int64_t(b) * p_.Hv * p_.K * p_.V : 0;
  }
  std::int64_t kv_row(int b) const { return std::int64_t(b) * p_.Hv * p_.K * p_.V; }
  std::int64_t kk_row(int b) const { return std::int64_t(b) * p_.Hv * p_.K * p_.K; }
  T* M_of(int s) { return pairs_.data() + s * dims_.pair_elems(); }
  T* U_of(int s) { return M_of(s) + dims_.a_elems(); }
  T* D_of(int s) { return D_.data() + s * dims_.b_elems(); }
  T* carried_of(int s) { return carried_.data() + s * dims_.b_elems(); }

  GdnProblem p_;
  std::int64_t t0_ = 0, t1_ = 0;
  PieceSplit split_;
  GdnInputView<T> in_;
  std::vector<std::int64_t> bounds_{0, 0};
  bool last_ends_ = false;    // the slice's last segment ends its sequence
  Pass whole_;                // S = 1: the slice as one LocalPass
  std::vector<Pass> passes_;  // S >= 2: [S][B], each one batch row of one piece
  PairDims dims_{};
  std::vector<T> pairs_;    // [S] pairs (M_s [BH, K, K], U_s [BH, K, V])
  std::vector<T> D_;        // [S][BH, K, V]: each piece's D_s
  std::vector<T> carried_;  // [S][BH, K, V]: entry states (forward) or exit adjoints
  std::vector<char> prepared_, have_pair_;
  bool have_D_ = false;  // D_ holds the D_s of adjoint(D_dO_, D_dht_)
  const T* D_dO_ = nullptr;
  const T* D_dht_ = nullptr;
};

static_assert(SlicePass<SplitLocalPass<float>, float>);

}  // namespace gdn
