#include "model/memory_estimate.h"

#include <algorithm>
#include <cstdio>

#include "model/mixer.h"
#include "model/mlp.h"

namespace gdn {

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) bytes /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
  return buf;
}

std::string MemoryEstimate::describe() const {
  return format_bytes(double(total())) + ": parameters " + format_bytes(double(params)) +
         ", gradients " + format_bytes(double(grads)) + ", AdamW moments " +
         format_bytes(double(moments)) + ", activations " + format_bytes(double(activations)) +
         " kept + " + format_bytes(double(transient)) + " transient";
}

MemoryEstimate estimate_memory(const ModelConfig& c, const ShardShape& s, int elem_bytes) {
  const std::int64_t d = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers;
  const std::int64_t N = s.tokens();
  // Parameters, as Model's constructor adds them.
  const std::int64_t qk = std::int64_t(c.linear_num_key_heads) * c.linear_key_head_dim;
  const std::int64_t vd = std::int64_t(c.linear_num_value_heads) * c.linear_value_head_dim;
  const std::int64_t Hv = c.linear_num_value_heads;
  const std::int64_t per_layer =
      2 * d + (2 * qk + 2 * vd) * d + 2 * Hv * d + (2 * qk + vd) * c.linear_conv_kernel_dim +
      2 * Hv + c.linear_value_head_dim + d * vd + 3 * d * std::int64_t(c.intermediate_size);
  const std::int64_t params = V * d + L * per_layer + d + (c.tie_word_embeddings ? 0 : V * d);
  // Activations: the residual stream and the normed inputs of every layer (x_in, x_mid,
  // h1, h2), and each layer's mixer and MLP; the transient peak is the largest of one
  // layer's backward scratch and the logits with the final norm's buffers.
  std::int64_t kept = (4 * L + 1) * N * d, transient = N * (V + 4 * d);
  for (int l = 0; l < L; ++l) {
    const ActivationElems m = mixer_activations(c.layer_type(l), c, s);
    const ActivationElems f = mlp_activations(c, l, N);
    kept += m.kept + f.kept;
    transient = std::max({transient, m.transient + 2 * N * d, f.transient + 2 * N * d});
  }
  MemoryEstimate e;
  e.params = params * elem_bytes;
  e.grads = params * elem_bytes;
  e.moments = 2 * params * elem_bytes;
  e.activations = kept * elem_bytes;
  e.transient = transient * elem_bytes;
  return e;
}

}  // namespace gdn
