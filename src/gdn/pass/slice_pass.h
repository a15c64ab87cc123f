// The one interface of a pass over a contiguous slice [t0, t1) of the sequence: LocalPass
// (the slice in one piece, gdn/pass/local_pass.h) and SplitLocalPass (the slice cut into
// pieces that run as virtual ranks, gdn/split/split_pass.h) both implement it, and CP's
// phases (cp/gdn_cp.h) run whichever the device takes. The contract of every member is
// said here once (docs/design.md §3-4, §6c):
//
//   reset(p, t0, t1, in)   points the pass at a slice: p is the global problem; `in` holds
//       the slice's tokens ([B, t1 - t0, H, D]), q and k already L2-normalised if asked;
//       in.h0, when set, is global [N, Hv, K, V]. The views must outlive the calls below.
//       Buffers are kept from call to call; the layout is rebuilt only when the slice or
//       the sequences change.
//   rebind(in)   other views of the same values as the last reset()'s (fresh copies of
//       inputs the caller freed in between, as the bf16 mode does): everything the passes
//       keep stays valid, so backward() may follow the output() before.
//   tokens()   t1 - t0 of the last reset().
//   prepare()   the WY factors of every chunk, kept for the passes below (chunks are
//       independent: parallel over chunks). adjoint() needs it; transition() and output()
//       without it make each chunk's factors on the fly where the device can. Phase 1 and
//       3 of CP share one prepare() (the WY reuse, §3).
//   transition(M, U)   phase 1: the slice as one affine map h_out = M h_in + U, per (b, h):
//       M [B, Hv, K, K], U [B, Hv, K, V]. An empty slice is the identity (M = I, U = 0).
//   output(h_in, o, ht)   phase 3: outputs o [B, t1 - t0, Hv, V] from the entry state
//       h_in [B, Hv, K, V] (null: zero). Keeps each chunk's entry state for backward().
//       ht, when set, gets the final state of every sequence that ends in this slice
//       (other rows untouched).
//   output_from_states(o, ht)   phase 3 again, for activation recomputation: the same o
//       and ht bits as the output() whose chunk entry states release(Keep::replay) kept,
//       on the same slice and inputs (reset() again with them is fine). No h_in: the kept
//       states already hold it. backward() may follow, as after output().
//   adjoint(dO, dht, D)   backward phase 1: D [B, Hv, K, V] = dLoss/dh_in with a zero exit
//       adjoint (lambda = 0); dht (global [N, Hv, K, V], may be null) applies where a
//       sequence ends in the slice.
//   backward(lambda, dO, dht, g)   backward phase 3 (after output()): gradients for this
//       slice's tokens, given the exit adjoint lambda [B, Hv, K, V] (null: zero). g.dq and
//       g.dk are with respect to the q and k of reset(). g.dh0 (global, may be null) gets
//       the rows of the sequences that start in this slice; other rows are untouched.
//   release(keep)   frees what the passes keep between calls (factors, scratch) for
//       activation recomputation (§6c). Keep::replay keeps the chunk entry states of the
//       last output() for output_from_states() after the next reset(); Keep::nothing frees
//       them too. The next reset() and passes allocate what they need again.
//   release_factors()   frees the WY factors only (the largest buffer), inside one
//       forward or backward; the passes that need them prepare() again.
#pragma once

#include <concepts>
#include <cstdint>

#include "core/device.h"
#include "core/lifecycle.h"
#include "gdn/problem.h"

namespace gdn {

template <typename P, typename T>
concept SlicePass = requires(P pass, const P& seen, const GdnProblem& p, std::int64_t t,
                             const GdnInputView<T>& in, T* x, const T* y, GdnGradView<T>& g,
                             Keep keep) {
  pass.reset(p, t, t, in);
  pass.rebind(in);
  { seen.tokens() } -> std::same_as<std::int64_t>;
  pass.prepare();
  pass.transition(x, x);
  pass.output(y, x, x);
  pass.output_from_states(x, x);
  pass.adjoint(y, y, x);
  pass.backward(y, y, y, g);
  pass.release(keep);
  pass.release_factors();
};

}  // namespace gdn
