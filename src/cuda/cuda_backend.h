// The device backend of GdnLayer / GdnModel (see model/host_backend.h for the interface):
// activations in DeviceVectors, the layers of cuda/cuda_ops.h (cuBLAS GEMMs through one
// handle), and flat device copies of every parameter's values and gradients, in parameter
// order (Param::offset). Copies of a backend share that state (the model hands its backend
// to its layers), so attach() once, after the last ParamStore::add. Everything runs on the
// legacy default stream, in call order. Plain C++ over the CUDA runtime and cuBLAS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cuda/cuda_ops.h"
#include "cuda/cuda_space.h"
#include "cuda/device_vector.h"
#include "model/params.h"

namespace gdn {

template <typename T>
class CudaBackend {
 public:
  using Vector = DeviceVector<T>;
  using Space = CudaSpace<T>;
  static constexpr bool kOnDevice = true;

  CudaBackend();  // a cuBLAS handle on the current device

  // Sizes the device copies to the store's parameters (zero values and gradients).
  void attach(const ParamStore<T>& ps);
  const T* value(const Param<T>& p) const { return s_->values.data() + p.offset; }
  T* grad(Param<T>& p) const { return s_->grads.data() + p.offset; }
  // The flat copies (num_elements() each): what the trainer all-reduces and updates.
  T* values() { return s_->values.data(); }
  T* grads() { return s_->grads.data(); }
  std::size_t num_elements() const { return s_->values.size(); }

  void upload_params(const ParamStore<T>& ps);
  void download_params(ParamStore<T>& ps) const;
  void download_grads(ParamStore<T>& ps) const;
  void zero_grads(ParamStore<T>& ps);  // the device gradients; the host ones are left alone

  // Host <-> device copies of n elements (token ids, AdamW moments for checkpoints).
  template <typename U>
  static DeviceVector<U> upload(const U* host, std::size_t n) {
    DeviceVector<U> v(n);
    v.upload(host);
    return v;
  }
  static void upload(T* device, const T* host, std::size_t n);
  static void download(T* host, const T* device, std::size_t n);

  // The optimizer's pieces (cuda/cuda_ops.h), for the trainer.
  static double sum_squares(const T* g, std::size_t n) {
    return cuda_ops::sum_squares<T>(g, std::int64_t(n));
  }
  static void scale(T* g, std::size_t n, double s) { cuda_ops::scale<T>(g, std::int64_t(n), s); }
  template <typename... A>
  static void adamw_update(A... a) {
    cuda_ops::adamw_update<T>(a...);
  }

  static void copy(T* dst, const T* src, std::size_t n);
  static void copy_rows(T* dst, std::int64_t dst_stride, const T* src, std::int64_t src_stride,
                        std::int64_t len, std::int64_t rows);
  void add(T* y, const T* a, const T* b, std::size_t n) const;  // y = a + b (y may be a)

  // The per-token layers, with the signatures of model/ops.h on device pointers.
  template <typename... A>
  void linear_forward(A... a) const {
    cuda_ops::linear_forward<T>(s_->handle, a...);
  }
  template <typename... A>
  void linear_backward(A... a) const {
    cuda_ops::linear_backward<T>(s_->handle, a...);
  }
  template <typename... A>
  void embedding_forward(A... a) const {
    cuda_ops::embedding_forward<T>(a...);
  }
  template <typename... A>
  void embedding_backward(A... a) const {
    cuda_ops::embedding_backward<T>(a...);
  }
  template <typename... A>
  void rmsnorm_forward(A... a) const {
    cuda_ops::rmsnorm_forward<T>(a...);
  }
  template <typename... A>
  void rmsnorm_backward(A... a) const {
    cuda_ops::rmsnorm_backward<T>(a...);
  }
  template <typename... A>
  void gated_rmsnorm_forward(A... a) const {
    cuda_ops::gated_rmsnorm_forward<T>(a...);
  }
  template <typename... A>
  void gated_rmsnorm_backward(A... a) const {
    cuda_ops::gated_rmsnorm_backward<T>(a...);
  }
  template <typename... A>
  void swiglu_forward(A... a) const {
    cuda_ops::swiglu_forward<T>(a...);
  }
  template <typename... A>
  void swiglu_backward(A... a) const {
    cuda_ops::swiglu_backward<T>(a...);
  }
  template <typename... A>
  void causal_conv_silu_forward(A... a) const {
    cuda_ops::causal_conv_silu_forward<T>(a...);
  }
  template <typename... A>
  void causal_conv_silu_backward(A... a) const {
    cuda_ops::causal_conv_silu_backward<T>(a...);
  }
  template <typename... A>
  void gdn_gating_forward(A... a) const {
    cuda_ops::gdn_gating_forward<T>(a...);
  }
  template <typename... A>
  void gdn_gating_backward(A... a) const {
    cuda_ops::gdn_gating_backward<T>(a...);
  }
  template <typename... A>
  double cross_entropy(A... a) const {
    return cuda_ops::cross_entropy<T>(a...);
  }

 private:
  struct State {
    cuda_ops::CublasHandle handle;
    DeviceVector<T> values, grads;
  };
  std::shared_ptr<State> s_;
};

}  // namespace gdn
