// The Qwen3-Next Gated DeltaNet layer (DESIGN.md section 5), forward and backward, on one
// context-parallel shard:
//
//   x -> in_proj_qkvz -> q, k (Hk K each), v, z (Hv V each);  x -> in_proj_ba -> b, a (Hv)
//   causal depthwise conv1d (kernel W, halo from the previous rank) over [q|k|v], SiLU
//   beta = sigmoid(b);  g = -exp(A_log) softplus(a + dt_bias)
//   o = GDN core with L2-normalised q, k (three-phase CP, cp/gdn_cp.h)
//   y = out_proj( RMSNorm(o) * norm.weight * SiLU(z) )   (gated RMSNorm per value head)
//
// Only the conv halo and the core's fixed-size pairs cross ranks. Backend says where it
// runs (model/host_backend.h; the CUDA build's CudaBackend): every pointer given to
// forward / backward lives in its memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/rng.h"
#include "cp/gdn_cp.h"
#include "model/host_backend.h"
#include "model/params.h"
#include "train/config.h"

namespace gdn {

template <typename T, typename Backend = HostBackend<T>>
class GdnLayer {
 public:
  using Vector = typename Backend::Vector;

  // Registers the parameters under `prefix` (e.g. "model.layers.0.linear_attn."). A device
  // backend must be attached to the ParamStore (Backend::attach) before forward.
  GdnLayer(ParamStore<T>& params, const std::string& prefix, const ModelConfig& c, int chunk_size,
           Backend backend = Backend());

  // Qwen3-Next initialisation: projections and conv ~ N(0, std) / U(+-1/sqrt(W)),
  // A_log = log U(0, 16), dt_bias = 1, norm weight = 1.
  void init(Rng& rng, double std);

  // x [B, Tl, d] (this shard of B sequences of T_global tokens) -> y [B, Tl, d].
  // Keeps what the backward needs.
  void forward(Communicator& cp, int B, std::int64_t Tl, std::int64_t T_global, const T* x, T* y);
  // dy [B, Tl, d] -> dx [B, Tl, d] (overwritten); parameter gradients accumulate.
  void backward(Communicator& cp, const T* dy, T* dx);

 private:
  Backend be_;
  int d_, Hk_, Hv_, K_, V_, W_, chunk_;
  double eps_;
  int qk_dim() const { return Hk_ * K_; }
  int v_dim() const { return Hv_ * V_; }
  int conv_dim() const { return 2 * qk_dim() + v_dim(); }
  int qkvz_dim() const { return 2 * qk_dim() + 2 * v_dim(); }

  Param<T>&in_proj_qkvz_, &in_proj_ba_, &conv1d_, &A_log_, &dt_bias_, &norm_, &out_proj_;

  // Activations of the last forward.
  int B_ = 0;
  std::int64_t Tl_ = 0, T_global_ = 0;
  Vector x_, z_, b_, a_, conv_in_, q_, k_, v_, beta_, g_, o_, normed_;
  std::unique_ptr<GdnContextParallel<T, typename Backend::Space>> core_;
};

}  // namespace gdn
