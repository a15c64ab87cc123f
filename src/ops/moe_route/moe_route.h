// Routing a MoE block on the device (model/moe_mlp.h): grouping the routed (token, slot)
// entries by expert, adding the experts' outputs back to their tokens, and the router's
// statistics for the load-balancing loss. Every pointer lives in the device's memory, so
// a step never brings the routing to the host.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// moe_route: the N k entries i = n k + j of idx [N, k] (token n's j-th expert) grouped by
//   expert, stably (tokens in order within an expert): expert e's entries are the
//   positions [offsets[e], offsets[e + 1]) (offsets [E + 1]); position s holds token
//   rows[s] and entry choice[s]; slot[i] is the position of entry i (choice's inverse).
//   Experts out of [0, E) are an error (the host names it; the GPU traps).
// moe_combine: y[n] += sum over token n's k entries, in position order (so in expert
//   order), of scale[s] src[s] (scale null: 1), one add per entry as scatter_add_rows.
// router_stats: stats[e] = offsets[e + 1] - offsets[e] (the top-k choices of expert e) and
//   stats[E + e] = sum over n of probs[n, e] in double (overwritten, 2 E numbers). The
//   host sums in token order; the GPU in blocks of rows (cuda_util's column sums).
void moe_route(Host, const std::int32_t* idx, std::int64_t N, int k, int E, std::int64_t* offsets,
               std::int64_t* rows, std::int64_t* choice, std::int64_t* slot);
void moe_route(Cuda, const std::int32_t* idx, std::int64_t N, int k, int E, std::int64_t* offsets,
               std::int64_t* rows, std::int64_t* choice, std::int64_t* slot);
template <typename T>
void moe_combine(Host, const T* src, const std::int64_t* slot, const T* scale, std::int64_t N,
                 int k, int d, T* y);
template <typename T>
void moe_combine(Cuda, const T* src, const std::int64_t* slot, const T* scale, std::int64_t N,
                 int k, int d, T* y);
template <typename T>
void router_stats(Host, const T* probs, const std::int64_t* offsets, std::int64_t N, int E,
                  double* stats);
template <typename T>
void router_stats(Cuda, const T* probs, const std::int64_t* offsets, std::int64_t N, int E,
                  double* stats);

}  // namespace gdn::ops
