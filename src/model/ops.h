// The per-token layers of the GDN model (DESIGN.md section 5), forward and hand-written
// backward, as plain functions on row-major host arrays, templated on float / double.
// Conventions: N is the number of rows (tokens); backward functions OVERWRITE the input
// gradients (dx, ...) and ACCUMULATE (+=) into parameter gradients (dW, ...), so a
// parameter shared by several call sites (a tied embedding) sums correctly. Input
// gradient pointers may be null when not needed. No MPI, no GDN core in here.
#pragma once

#include <cstdint>

namespace gdn::ops {

// y[N, out] = x[N, in] W^T, W [out, in] (the Hugging Face / PyTorch layout).
template <typename T>
void linear_forward(const T* x, const T* W, std::int64_t N, int in, int out, T* y);
// dx[N, in] = dy W;  dW[out, in] += dy^T x.
template <typename T>
void linear_backward(const T* x, const T* W, const T* dy, std::int64_t N, int in, int out, T* dx,
                     T* dW);

// y[N, d] = E[tokens[i], :], E [vocab, d]. Token ids are checked: out of range throws.
template <typename T>
void embedding_forward(const std::int32_t* tokens, const T* E, std::int64_t N, int vocab, int d,
                       T* y);
// dE[tokens[i], :] += dy[i, :].
template <typename T>
void embedding_backward(const std::int32_t* tokens, const T* dy, std::int64_t N, int vocab, int d,
                        T* dE);

// Qwen3-Next RMSNorm: y = x / sqrt(mean(x^2) + eps) * (1 + w), w [d] (zero-initialised).
template <typename T>
void rmsnorm_forward(const T* x, const T* w, std::int64_t N, int d, double eps, T* y);
template <typename T>
void rmsnorm_backward(const T* x, const T* w, const T* dy, std::int64_t N, int d, double eps, T* dx,
                      T* dw);

// Gated RMSNorm over rows of d (one row per token and value head):
// y = x / sqrt(mean(x^2) + eps) * w * silu(z), w [d] (one-initialised).
template <typename T>
void gated_rmsnorm_forward(const T* x, const T* z, const T* w, std::int64_t N, int d, double eps,
                           T* y);
template <typename T>
void gated_rmsnorm_backward(const T* x, const T* z, const T* w, const T* dy, std::int64_t N, int d,
                            double eps, T* dx, T* dz, T* dw);

// SwiGLU core: y = silu(g) * u elementwise over n elements.
template <typename T>
void swiglu_forward(const T* g, const T* u, std::int64_t n, T* y);
template <typename T>
void swiglu_backward(const T* g, const T* u, const T* dy, std::int64_t n, T* dg, T* du);

// Causal depthwise conv1d + SiLU over C channels, kernel W, no bias, per batch row:
// x [B, (W - 1) + T, C] holds W - 1 rows of history (the halo: zeros at the sequence
// start, the previous rank's last rows under CP) followed by the T rows of this shard;
// y[b, t, c] = silu(sum_j w[c, j] * x[b, t + j, c]), w [C, W] (j = W - 1 is the current
// token, as PyTorch's conv1d with padding W - 1 and the output cut to T).
template <typename T>
void causal_conv_silu_forward(const T* x, const T* w, int B, std::int64_t T_len, int C, int W,
                              T* y);
// dx [B, (W - 1) + T, C] (the halo rows get their gradient too); dw [C, W] +=.
template <typename T>
void causal_conv_silu_backward(const T* x, const T* w, const T* dy, int B, std::int64_t T_len,
                               int C, int W, T* dx, T* dw);

// GDN gating per token and value head (N rows of H):
// beta = sigmoid(b);  g = -exp(A_log[h]) * softplus(a + dt_bias[h]).
template <typename T>
void gdn_gating_forward(const T* b, const T* a, const T* A_log, const T* dt_bias, std::int64_t N,
                        int H, T* beta, T* g);
// db, da overwritten; dA_log, ddt_bias [H] +=.
template <typename T>
void gdn_gating_backward(const T* b, const T* a, const T* A_log, const T* dt_bias, const T* dbeta,
                         const T* dg, std::int64_t N, int H, T* db, T* da, T* dA_log, T* ddt_bias);

// Cross-entropy of logits [N, V] against targets [N] (ids in [0, V)). Returns the SUM of
// -log softmax(logits)[target] over the N rows (accumulated in double); writes
// dlogits = (softmax - onehot) * grad_scale (grad_scale = 1 / tokens of the global batch).
template <typename T>
double cross_entropy(const T* logits, const std::int32_t* targets, std::int64_t N, int V,
                     double grad_scale, T* dlogits);

}  // namespace gdn::ops
