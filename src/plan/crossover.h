// Where GDN's fixed exchange becomes cheaper than softmax attention's, in tokens per
// shard, per layer and for the whole model, computed at cp = 2 when cp is 1. The
// formulas: docs/design.md §10.
#pragma once

#include <optional>

#include "plan/plan_input.h"

namespace gdn::plan {

struct Crossover {
  int cp = 2;  // the degree it is computed at
  // Tokens per shard (step: forward + backward); empty when the model lacks GDN or
  // attention layers.
  std::optional<double> layer_forward, layer_step, model_forward, model_step;
};

Crossover crossover(const PlanInput& in);

}  // namespace gdn::plan
