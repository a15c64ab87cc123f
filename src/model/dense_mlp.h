// The dense SwiGLU MLP: y = down_proj( silu(gate_proj(x)) * up_proj(x) ).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/mlp.h"
#include "ops/convert/kept.h"

namespace gdn {

template <typename T, typename Dev>
class DenseMlp final : public Mlp<T, Dev> {
 public:
  // Registers gate_proj, up_proj, down_proj under `name` ("model.layers.3.mlp." or a
  // MoE block's "...mlp.shared_expert.").
  DenseMlp(ParamStore<T, Dev>& ps, const std::string& name, int hidden, int intermediate,
           Precision precision = Precision::plain);

  void init(Rng& rng, double std, const HostParams<T>& host) const override;
  const char* kind() const override { return "mlp"; }
  void rebind_input(const T* x) override { x_ = x; }
  static ActivationElems activations(int hidden, int intermediate, std::int64_t N);

 protected:
  void do_forward(std::int64_t N, const T* x, T* y) override;
  void do_backward(const T* dy, T* dx) override;
  void do_release() override;

 private:
  ParamStore<T, Dev>& ps_;
  int d_, I_;
  // Precision::bf16: the layer's matmuls on bf16 operands, its activations kept in bf16
  // (core/precision.h).
  Precision precision_;
  ParamId gate_proj_, up_proj_, down_proj_;
  std::int64_t N_ = 0;
  const T* x_ = nullptr;
  Kept<T, Dev> gate_, up_, act_;
};

}  // namespace gdn
