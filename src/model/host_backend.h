// Where the model runs: HostBackend keeps activations in std::vectors, reads parameters
// straight from the ParamStore and calls the host layers of model/ops.h. GdnLayer and
// GdnModel are written once against this small interface; the CUDA build adds a device
// backend (src/cuda/cuda_backend.h) with the same members.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cp/host_space.h"
#include "model/ops.h"
#include "model/params.h"

namespace gdn {

template <typename T>
class HostBackend {
 public:
  using Vector = std::vector<T>;
  using Space = HostSpace<T>;  // of the GDN core and the conv halo
  static constexpr bool kOnDevice = false;

  // Parameters: the ParamStore's own tensors are the working copy, so there is nothing to
  // mirror (the device backend keeps flat device copies, see cuda_backend.h).
  void attach(const ParamStore<T>&) {}
  const T* value(const Param<T>& p) const { return p.value.ptr(); }
  T* grad(Param<T>& p) const { return p.grad.ptr(); }
  void upload_params(const ParamStore<T>&) {}
  void download_params(ParamStore<T>&) const {}
  void download_grads(ParamStore<T>&) const {}
  void zero_grads(ParamStore<T>& ps) { ps.zero_grad(); }

  // Moves within the backend's memory.
  static void copy(T* dst, const T* src, std::size_t n) { std::copy_n(src, n, dst); }
  // rows x len elements from rows of stride src_stride to rows of stride dst_stride.
  static void copy_rows(T* dst, std::int64_t dst_stride, const T* src, std::int64_t src_stride,
                        std::int64_t len, std::int64_t rows) {
    for (std::int64_t i = 0; i < rows; ++i)
      std::copy_n(src + i * src_stride, len, dst + i * dst_stride);
  }
  // y = a + b over n elements (y may be a).
  static void add(T* y, const T* a, const T* b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  }

  // The per-token layers, with the signatures of model/ops.h.
  template <typename... A>
  void linear_forward(A... a) const {
    ops::linear_forward<T>(a...);
  }
  template <typename... A>
  void linear_backward(A... a) const {
    ops::linear_backward<T>(a...);
  }
  template <typename... A>
  void embedding_forward(A... a) const {
    ops::embedding_forward<T>(a...);
  }
  template <typename... A>
  void embedding_backward(A... a) const {
    ops::embedding_backward<T>(a...);
  }
  template <typename... A>
  void rmsnorm_forward(A... a) const {
    ops::rmsnorm_forward<T>(a...);
  }
  template <typename... A>
  void rmsnorm_backward(A... a) const {
    ops::rmsnorm_backward<T>(a...);
  }
  template <typename... A>
  void gated_rmsnorm_forward(A... a) const {
    ops::gated_rmsnorm_forward<T>(a...);
  }
  template <typename... A>
  void gated_rmsnorm_backward(A... a) const {
    ops::gated_rmsnorm_backward<T>(a...);
  }
  template <typename... A>
  void swiglu_forward(A... a) const {
    ops::swiglu_forward<T>(a...);
  }
  template <typename... A>
  void swiglu_backward(A... a) const {
    ops::swiglu_backward<T>(a...);
  }
  template <typename... A>
  void causal_conv_silu_forward(A... a) const {
    ops::causal_conv_silu_forward<T>(a...);
  }
  template <typename... A>
  void causal_conv_silu_backward(A... a) const {
    ops::causal_conv_silu_backward<T>(a...);
  }
  template <typename... A>
  void gdn_gating_forward(A... a) const {
    ops::gdn_gating_forward<T>(a...);
  }
  template <typename... A>
  void gdn_gating_backward(A... a) const {
    ops::gdn_gating_backward<T>(a...);
  }
  template <typename... A>
  double cross_entropy(A... a) const {
    return ops::cross_entropy<T>(a...);
  }
};

}  // namespace gdn
