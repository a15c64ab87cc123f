// The pieces of a sparse mixture-of-experts block that are not GEMMs (model/moe_mlp.h):
// the softmax top-k router and its backward, moving token rows to and from an expert's
// batch, and the sigmoid-gated shared expert. Every pointer (idx, rows, dprob_all too)
// lives in the device's memory.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace gdn::ops {

// router_forward: probs [N, E] = softmax(logits) per row (in double); idx [N, k] the k
//   most probable experts, most probable first (ties to the lower index, as torch.topk);
//   weights [N, k] their probabilities, divided by their sum when renorm.
// router_backward: dlogits [N, E] (overwritten) from dweights [N, k], plus dprob_all[e]
//   added to d(probs[n, e]) for every row when not null (the load-balancing loss).
// gather_rows: dst[i] = src[rows[i]] for i < n (rows of d).
// scatter_add_rows: dst[rows[i]] += scale[i] * src[i] (scale null: 1); rows distinct.
// row_dots: out[i] = <a[i], b[i]> over rows of d (in double).
// scale_rows: y[i] = s[i] * x[i] (y may be x).
// shared_gate_forward: y[n] += sigmoid(z[n]) * s[n], the shared expert's gate.
// shared_gate_backward: ds[n] = sigmoid(z[n]) dy[n] (overwritten); dz[n] = <dy[n], s[n]>
//   sigmoid'(z[n]) (overwritten).
template <typename T>
void router_forward(Host, const T* logits, std::int64_t N, int E, int k, bool renorm, T* probs,
                    std::int32_t* idx, T* weights);
template <typename T>
void router_forward(Cuda, const T* logits, std::int64_t N, int E, int k, bool renorm, T* probs,
                    std::int32_t* idx, T* weights);
template <typename T>
void router_backward(Host, const T* probs, const std::int32_t* idx, const T* dweights,
                     std::int64_t N, int E, int k, bool renorm, const double* dprob_all,
                     T* dlogits);
template <typename T>
void router_backward(Cuda, const T* probs, const std::int32_t* idx, const T* dweights,
                     std::int64_t N, int E, int k, bool renorm, const double* dprob_all,
                     T* dlogits);
template <typename T>
void gather_rows(Host, const T* src, const std::int64_t* rows, std::int64_t n, int d, T* dst);
template <typename T>
void gather_rows(Cuda, const T* src, const std::int64_t* rows, std::int64_t n, int d, T* dst);
template <typename T>
void scatter_add_rows(Host, const T* src, const std::int64_t* rows, const T* scale, std::int64_t n,
                      int d, T* dst);
template <typename T>
void scatter_add_rows(Cuda, const T* src, const std::int64_t* rows, const T* scale, std::int64_t n,
                      int d, T* dst);
template <typename T>
void row_dots(Host, const T* a, const T* b, std::int64_t n, int d, T* out);
template <typename T>
void row_dots(Cuda, const T* a, const T* b, std::int64_t n, int d, T* out);
template <typename T>
void scale_rows(Host, const T* x, const T* s, std::int64_t n, int d, T* y);
template <typename T>
void scale_rows(Cuda, const T* x, const T* s, std::int64_t n, int d, T* y);
template <typename T>
void shared_gate_forward(Host, const T* s, const T* z, std::int64_t N, int d, T* y);
template <typename T>
void shared_gate_forward(Cuda, const T* s, const T* z, std::int64_t N, int d, T* y);
template <typename T>
void shared_gate_backward(Host, const T* s, const T* z, const T* dy, std::int64_t N, int d, T* ds,
                          T* dz);
template <typename T>
void shared_gate_backward(Cuda, const T* s, const T* z, const T* dy, std::int64_t N, int d, T* ds,
                          T* dz);

}  // namespace gdn::ops
