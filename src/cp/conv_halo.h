// The causal conv's halo under context parallelism (docs/design.md §5): a
// rank's conv needs the W - 1 rows of history before its shard. They come from the
// previous rank; when that rank holds fewer than W - 1 tokens, part of its outgoing halo
// is the history it received itself, so the halo travels as a chain in rank order (rank 0
// starts from zeros). Every rank but the last sends exactly B (W - 1) C elements, and
// every rank but the first receives as much; the backward returns the halo's gradient the
// same way. Buffers live in Dev's memory; with Dev = Cuda the Communicator must take
// device buffers.
#pragma once

#include <cstdint>

#include "comm/communicator.h"

namespace gdn {

// local [B, Tl, C]: this shard's conv inputs. halo [B, W - 1, C]: written with the W - 1
// rows before the shard (zeros on rank 0).
template <typename T, typename Dev>
void conv_halo_forward(Communicator& comm, const T* local, int B, std::int64_t Tl, int C, int W,
                       T* halo);

// dhalo [B, W - 1, C]: on entry the gradient of this rank's halo rows from its own conv;
// it is sent to the previous rank. dlocal [B, Tl, C]: on exit += the gradient of the rows
// this rank sent forward, as returned by the next rank. Call on every rank.
template <typename T, typename Dev>
void conv_halo_backward(Communicator& comm, int B, std::int64_t Tl, int C, int W, T* dhalo,
                        T* dlocal);

}  // namespace gdn
