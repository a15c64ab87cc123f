// Where GDN's fixed exchange becomes cheaper than softmax attention's, in tokens per
// shard. Exchange here is what arrives at one rank per step over a ring (an all-gather or
// reduce-scatter of blocks of b bytes brings in (P - 1) b; a halo hop brings in its
// message), per layer:
//
//   GDN forward      (P - 1) Hv K (K + V) + (W - 1) Cc            elements per sequence
//   GDN fwd + bwd    (P - 1) Hv K (K + 2V) + 2 (W - 1) Cc
//   attention fwd    (P - 1) Tl 2 Hkv D                            (K, V all-gathered)
//   attention f + b  (P - 1) Tl 4 Hkv D                            (+ dK, dV reduce-scattered)
//
// Setting them equal gives the crossover Tl* (batch and dtype cancel):
//   forward:  Tl* = [Hv K (K + V) + (W - 1) Cc / (P - 1)] / (2 Hkv D)
//   step:     Tl* = [Hv K (K + 2V) + 2 (W - 1) Cc / (P - 1)] / (4 Hkv D)
// and, for the whole model, the GDN side times the GDN layers and the attention side
// times the attention layers (Tl* x n_gdn / n_attn). layer_local's all-to-alls, which add
// to attention's side, are left out. At cp = 1 nothing is exchanged: the crossover is
// given for cp = 2.
#pragma once

#include <optional>

#include "plan/plan_input.h"

namespace gdn::plan {

struct Crossover {
  int cp = 2;  // the degree it is computed at
  // Tokens per shard; empty when the model lacks GDN or attention layers.
  std::optional<double> layer_forward, layer_step, model_forward, model_step;
};

Crossover crossover(const PlanInput& in);

}  // namespace gdn::plan
