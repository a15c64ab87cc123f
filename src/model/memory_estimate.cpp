#include "model/memory_estimate.h"

#include <algorithm>
#include <cstdio>

#include "model/mixer.h"
#include "model/mlp.h"
#include "model/model.h"

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

MemoryEstimate estimate_memory(const ModelConfig& c, const ShardShape& s, int elem_bytes,
                               bool recompute) {
  const std::int64_t d = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers;
  const std::int64_t N = s.tokens(), nd = N * d;
  const std::int64_t params = parameter_count(c);
  // Kept either way: every layer's input and the final one. The LM head and the loss run
  // block by block: the final norm's output and gradient, dx, and one block of logits.
  const std::int64_t block =
      std::min(std::max<std::int64_t>(N, 1), std::max<std::int64_t>(1, kLossBlockElems / V));
  std::int64_t kept = (L + 1) * nd, transient = 3 * nd + block * V, largest_layer = 0;
  for (int l = 0; l < L; ++l) {
    const ActivationElems m = mixer_activations(c.layer_type(l), c, s);
    const ActivationElems f = mlp_activations(c, l, N);
    // x_mid, h1, h2 and the mixer's and MLP's own; the backward's dh and tmp and dx.
    const std::int64_t layer_kept = 3 * nd + m.kept + f.kept;
    const std::int64_t layer_transient = std::max(m.transient, f.transient) + 3 * nd;
    if (recompute) {
      // One layer's activations at a time (made again before its backward), plus the
      // recomputed output; what came from other ranks (and GDN's per-chunk entry states)
      // stays for every layer.
      kept += m.exchanged;
      largest_layer = std::max(largest_layer, layer_kept + layer_transient + nd);
    } else {
      kept += layer_kept;
      largest_layer = std::max(largest_layer, layer_transient);
    }
  }
  transient = std::max(transient, largest_layer);
  MemoryEstimate e;
  e.params = params * elem_bytes;
  e.grads = params * elem_bytes;
  e.moments = 2 * params * elem_bytes;
  e.activations = kept * elem_bytes;
  e.transient = transient * elem_bytes;
  return e;
}

}  // namespace gdn
