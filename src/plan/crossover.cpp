#include "plan/crossover.h"

#include <algorithm>

namespace gdn::plan {

Crossover crossover(const PlanInput& in) {
  const ModelConfig& c = in.model;
  Crossover x;
  x.cp = std::max(in.cp, 2);
  const int n_attn = c.num_attention_layers(), n_gdn = c.num_hidden_layers - n_attn;
  if (n_attn == 0 || n_gdn == 0) return x;
  const double P1 = x.cp - 1;
  const double Hv = c.linear_num_value_heads, K = c.linear_key_head_dim;
  const double V = c.linear_value_head_dim;
  const double halo = (c.linear_conv_kernel_dim - 1) * (2.0 * c.linear_num_key_heads * K + Hv * V);
  const double kv = 2.0 * c.num_key_value_heads * c.head_dim;  // per token, K and V
  x.layer_forward = (Hv * K * (K + V) + halo / P1) / kv;
  x.layer_step = (Hv * K * (K + 2 * V) + 2 * halo / P1) / (2 * kv);
  x.model_forward = *x.layer_forward * n_gdn / n_attn;
  x.model_step = *x.layer_step * n_gdn / n_attn;
  return x;
}

}  // namespace gdn::plan
