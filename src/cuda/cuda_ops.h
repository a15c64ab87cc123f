// The per-token layers of model/ops.h on the GPU: the same functions, names and argument
// order, on DEVICE pointers (a cuBLAS handle first where a GEMM is involved), and the
// optimizer's element-wise pieces (AdamW update, sum of squares for the global norm,
// scaling). Conventions are those of model/ops.h: backward functions OVERWRITE input
// gradients and ACCUMULATE (+=) into parameter gradients; null gradient pointers are
// skipped. The arithmetic follows the host code (intermediates in double where it uses
// double), so the two agree to rounding.
//
// Everything runs on the legacy default stream (the handle's stream is left at its
// default), in call order. Functions that check token / target ids copy them to the host
// first (and so synchronise); cross_entropy and sum_squares return a host value and
// synchronise too. Parameter-gradient reductions over rows use no atomics: fixed row
// blocks summed in a fixed order, so results are bit-identical from run to run.
// Plain C++ header over the CUDA runtime and cuBLAS, usable from .cpp and .cu files.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

namespace gdn::cuda_ops {

// Owns a cuBLAS handle (cublasCreate / cublasDestroy) on the current device, with the
// default math mode (no TF32 for fp32 GEMMs). Move-only.
class CublasHandle {
 public:
  CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  CublasHandle(CublasHandle&& o) noexcept;
  CublasHandle& operator=(CublasHandle&& o) noexcept;
  ~CublasHandle();

  cublasHandle_t get() const { return h_; }
  operator cublasHandle_t() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

// y[N, out] = x[N, in] W^T, W [out, in]. N must fit in an int (cuBLAS).
template <typename T>
void linear_forward(cublasHandle_t h, const T* x, const T* W, std::int64_t N, int in, int out,
                    T* y);
// dx[N, in] = dy W;  dW[out, in] += dy^T x.
template <typename T>
void linear_backward(cublasHandle_t h, const T* x, const T* W, const T* dy, std::int64_t N, int in,
                     int out, T* dx, T* dW);

// y[N, d] = E[tokens[i], :]. Token ids (device) are copied to the host and checked: out of
// range throws gdn::Error before anything is launched.
template <typename T>
void embedding_forward(const std::int32_t* tokens, const T* E, std::int64_t N, int vocab, int d,
                       T* y);
// dE[tokens[i], :] += dy[i, :]; repeated tokens add in row order (as the host code does).
template <typename T>
void embedding_backward(const std::int32_t* tokens, const T* dy, std::int64_t N, int vocab, int d,
                        T* dE);

// Qwen3-Next RMSNorm: y = x / sqrt(mean(x^2) + eps) * (1 + w).
template <typename T>
void rmsnorm_forward(const T* x, const T* w, std::int64_t N, int d, double eps, T* y);
template <typename T>
void rmsnorm_backward(const T* x, const T* w, const T* dy, std::int64_t N, int d, double eps, T* dx,
                      T* dw);

// Gated RMSNorm: y = x / sqrt(mean(x^2) + eps) * w * silu(z).
template <typename T>
void gated_rmsnorm_forward(const T* x, const T* z, const T* w, std::int64_t N, int d, double eps,
                           T* y);
template <typename T>
void gated_rmsnorm_backward(const T* x, const T* z, const T* w, const T* dy, std::int64_t N, int d,
                            double eps, T* dx, T* dz, T* dw);

// SwiGLU core: y = silu(g) * u over n elements.
template <typename T>
void swiglu_forward(const T* g, const T* u, std::int64_t n, T* y);
template <typename T>
void swiglu_backward(const T* g, const T* u, const T* dy, std::int64_t n, T* dg, T* du);

// Causal depthwise conv1d + SiLU; x [B, (W - 1) + T, C] with the halo rows first, w [C, W].
template <typename T>
void causal_conv_silu_forward(const T* x, const T* w, int B, std::int64_t T_len, int C, int W,
                              T* y);
// dx [B, (W - 1) + T, C] (halo rows included) overwritten; dw [C, W] +=.
template <typename T>
void causal_conv_silu_backward(const T* x, const T* w, const T* dy, int B, std::int64_t T_len,
                               int C, int W, T* dx, T* dw);

// GDN gating: beta = sigmoid(b);  g = -exp(A_log[h]) * softplus(a + dt_bias[h]).
template <typename T>
void gdn_gating_forward(const T* b, const T* a, const T* A_log, const T* dt_bias, std::int64_t N,
                        int H, T* beta, T* g);
// db, da overwritten; dA_log, ddt_bias [H] +=.
template <typename T>
void gdn_gating_backward(const T* b, const T* a, const T* A_log, const T* dt_bias, const T* dbeta,
                         const T* dg, std::int64_t N, int H, T* db, T* da, T* dA_log, T* ddt_bias);

// Cross-entropy of logits [N, V] against targets [N]: returns the SUM of the row losses
// (per-row losses in double, summed on the host in row order, as the host code does);
// writes dlogits = (softmax - onehot) * grad_scale unless dlogits is null. Targets (device)
// are copied to the host and checked first: out of range throws gdn::Error.
template <typename T>
double cross_entropy(const T* logits, const std::int32_t* targets, std::int64_t N, int V,
                     double grad_scale, T* dlogits);

// One AdamW update of n elements, the math of AdamW<T>::step (train/optimizer.cpp) in
// double: p *= 1 - lr * wd (pass wd = 0 for parameters without decay), then
// m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr * (m / bc1) / (sqrt(v / bc2) + eps)
// with bc = 1 - beta^(step + 1); step is 0-based.
template <typename T>
void adamw_update(T* p, const T* g, T* m, T* v, std::int64_t n, double lr, double beta1,
                  double beta2, double eps, double wd, std::int64_t step);

// sum_i double(g_i)^2 over n elements: two passes (fixed per-block partials, then one block
// sums them in a fixed order), so the result depends on n alone, never on the device.
template <typename T>
double sum_squares(const T* g, std::int64_t n);

// g = T(double(g) * s), the scaling of clip_grad_norm.
template <typename T>
void scale(T* g, std::int64_t n, double s);

}  // namespace gdn::cuda_ops
