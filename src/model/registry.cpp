// The one place that maps a layer's config to its mixer and MLP implementations.
#include "core/error.h"
#include "model/attention_mixer.h"
#include "model/dense_mlp.h"
#include "model/gdn_mixer.h"
#include "model/mixer.h"
#include "model/mlp.h"
#include "model/moe_mlp.h"
#include "runtime/devices.h"

namespace gdn {

ActivationElems mixer_activations(LayerType type, const ModelConfig& c, const ShardShape& s) {
  switch (type) {
    case LayerType::linear_attention:
      return GdnMixer<float, Host>::activations(c, s);
    case LayerType::full_attention:
      return AttentionMixer<float, Host>::activations(c, s);
  }
  throw_error("mixer_activations: layer type ", int(type), " has no mixer");
}

ActivationElems mlp_activations(const ModelConfig& c, int layer, std::int64_t N, int ep) {
  if (c.is_moe_layer(layer)) return MoeMlp<float, Host>::activations(c, N, ep);
  return DenseMlp<float, Host>::activations(c.hidden_size, c.intermediate_size, N);
}

template <typename T, typename Dev>
std::unique_ptr<Mixer<T, Dev>> make_mixer(LayerType type, ParamStore<T, Dev>& ps,
                                          const std::string& prefix, const ModelConfig& c,
                                          int chunk_size, Precision precision) {
  switch (type) {
    case LayerType::linear_attention:
      return std::make_unique<GdnMixer<T, Dev>>(ps, prefix, c, chunk_size, precision);
    case LayerType::full_attention:
      return std::make_unique<AttentionMixer<T, Dev>>(ps, prefix, c, precision);
  }
  throw_error("make_mixer: layer type ", int(type), " has no mixer");
}

template <typename T, typename Dev>
std::unique_ptr<Mlp<T, Dev>> make_mlp(ParamStore<T, Dev>& ps, const std::string& prefix,
                                      const ModelConfig& c, int layer, ExpertSplit split,
                                      Precision precision) {
  if (c.is_moe_layer(layer))
    return std::make_unique<MoeMlp<T, Dev>>(ps, prefix, c, split, precision);
  return std::make_unique<DenseMlp<T, Dev>>(ps, prefix + "mlp.", c.hidden_size, c.intermediate_size,
                                            precision);
}

#define GDN_REGISTRY_INSTANTIATE(T, Dev)                                                       \
  template std::unique_ptr<Mixer<T, Dev>> make_mixer<T, Dev>(                                  \
      LayerType, ParamStore<T, Dev>&, const std::string&, const ModelConfig&, int, Precision); \
  template std::unique_ptr<Mlp<T, Dev>> make_mlp<T, Dev>(                                      \
      ParamStore<T, Dev>&, const std::string&, const ModelConfig&, int, ExpertSplit, Precision);
GDN_FOR_EACH_DEVICE(GDN_REGISTRY_INSTANTIATE)
#undef GDN_REGISTRY_INSTANTIATE

}  // namespace gdn
