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
         format_bytes(double(moments)) +
         (gathered > 0 ? ", gathered units " + format_bytes(double(gathered)) : std::string()) +
         ", activations " + format_bytes(double(activations)) + " kept + " +
         format_bytes(double(transient)) + " transient";
}

MemoryEstimate state_elements(const ModelConfig& c, StateLayout state) {
  const std::vector<ParamUnit> units = parameter_units(c, ExpertSplit{state.ep, 0});
  const std::int64_t n = units.back().end;
  MemoryEstimate e;
  if (state.shard == Sharding::none) {
    e.params = e.grads = n;
    e.moments = 2 * n;
    return e;
  }
  const ParamPartition part(units, state.world, 0, state.world / state.ep, 0);
  const std::int64_t owned = part.owned();
  e.moments = 2 * owned;
  // The reduce-scatter's input: W whole blocks of a unit.
  std::int64_t padded = 0;
  for (std::size_t u = 0; u < units.size(); ++u)
    padded = std::max(padded, part.group_size(u) * part.part(u).block);
  if (state.shard == Sharding::optimizer) {
    e.params = n + owned;  // the whole values, and the owned ones the update runs on
    e.grads = n + owned;
    e.gathered = padded;
    return e;
  }
  e.params = e.grads = owned;
  // A unit's values and gradients while it is in use, and its reduce-scatter buffer; the
  // final norm's unit holds the embedding's too when the LM head is tied to it.
  for (std::size_t u = 0; u < units.size(); ++u) {
    std::int64_t held = 2 * units[u].size();
    if (u + 1 == units.size() && c.tie_word_embeddings) held += 2 * units[0].size();
    e.gathered = std::max(e.gathered, held + part.group_size(u) * part.part(u).block);
  }
  return e;
}

MemoryEstimate estimate_memory(const ModelConfig& c, const ShardShape& s, int elem_bytes,
                               bool recompute, StateLayout state, bool bf16) {
  const std::int64_t d = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers;
  const std::int64_t N = s.tokens(), nd = N * d, e = elem_bytes;
  // Bytes of a layer part's kept activations, and of what its backward decodes: the bf16
  // mode keeps kept_bf16 of them in two bytes each (ops/convert/kept.h).
  auto kept_bytes = [&](const ActivationElems& a) {
    return a.kept * e - (bf16 ? a.kept_bf16 * (e - 2) + a.remade_bf16 * e : 0);
  };
  auto decoded_bytes = [&](const ActivationElems& a) { return bf16 ? a.decoded * e : 0; };
  // Kept either way: every layer's input and the final one (the bf16 mode keeps the
  // layers' inputs in bf16 unless recomputing, whose forward runs again from them). The LM
  // head and the loss run block by block: the final norm's output and gradient, dx, and
  // one block of logits.
  const std::int64_t block = loss_block_tokens(0, V, N), input = bf16 && !recompute ? 2 : e;
  std::int64_t kept = L * nd * input + nd * e, transient = (3 * nd + block * V) * e,
               largest_layer = 0;
  for (int l = 0; l < L; ++l) {
    const ActivationElems m = mixer_activations(c.layer_type(l), c, s);
    const ActivationElems f = mlp_activations(c, l, N, state.ep);
    // x_mid, h1, h2 (bf16 in the bf16 mode) and the mixer's and MLP's own; the backward's
    // dh and tmp and dx, and in the bf16 mode the decoded x_mid, h1, h2 or input.
    const std::int64_t layer_kept = 3 * nd * (bf16 ? 2 : e) + kept_bytes(m) + kept_bytes(f);
    const std::int64_t layer_transient =
        std::max(m.transient * e + decoded_bytes(m), f.transient * e + decoded_bytes(f)) +
        3 * nd * e + (bf16 ? nd * e : 0);
    if (recompute) {
      // One layer's activations at a time (made again before its backward), plus the
      // recomputed output; what came from other ranks (and GDN's per-chunk entry states)
      // stays for every layer.
      kept += m.exchanged * e;
      largest_layer = std::max(largest_layer, layer_kept + layer_transient + nd * e);
    } else {
      kept += layer_kept;
      largest_layer = std::max(largest_layer, layer_transient);
    }
  }
  transient = std::max(transient, largest_layer);
  MemoryEstimate est = state_elements(c, state);
  est.params *= e;
  est.grads *= e;
  est.moments *= e;
  est.gathered *= e;
  est.activations = kept;
  est.transient = transient;
  return est;
}

}  // namespace gdn
