// Shared helpers for the GDN tests: problems, seeded inputs and cotangents, gradient
// buffers and error norms.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "gdn/problem.h"
#include "gdn/random_inputs.h"
#include "model/model_config.h"

namespace gdn::test {

// The message of the gdn::Error that f throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A file's whole contents, and a file made of given bytes (truncating what was there).
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory under the system's temporary directory, removed with everything in
// it when the object goes.
struct TempDir {
  std::filesystem::path dir;
  explicit TempDir(const std::string& prefix = "gdn_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    char* d = mkdtemp(tmpl.data());
    if (!d) throw std::runtime_error("mkdtemp failed");
    dir = d;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path(const std::string& name) const { return (dir / name).string(); }
  std::string operator/(const std::string& name) const { return path(name); }
};

// ||a - b|| / ||b|| (0 when both are zero).
template <typename A, typename B>
double rel_l2(const A* a, const B* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}
template <typename A, typename B>
double rel_l2(const Tensor<A>& a, const Tensor<B>& b) {
  return rel_l2(a.ptr(), b.ptr(), std::size_t(b.size()));
}

template <typename T>
Tensor<T> random_tensor(Shape s, std::uint64_t seed, double scale = 1.0) {
  Tensor<T> t(std::move(s));
  Rng rng(seed);
  for (T& x : t.data) x = T(scale * rng.normal());
  return t;
}

// Central differences of loss() with respect to each of the n elements at x (perturbed in
// place and restored): the fp64 oracle for every hand-written backward.
template <typename F>
std::vector<double> finite_differences(double* x, std::size_t n, F loss, double eps = 1e-6) {
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x0 = x[i];
    x[i] = x0 + eps;
    const double lp = loss();
    x[i] = x0 - eps;
    const double lm = loss();
    x[i] = x0;
    g[i] = (lp - lm) / (2 * eps);
  }
  return g;
}
template <typename F>
std::vector<double> finite_differences(std::vector<double>& x, F loss, double eps = 1e-6) {
  return finite_differences(x.data(), x.size(), loss, eps);
}

// Rows [t0, t1) of the token axis of a [B, T, ...] tensor (a rank's shard, a slice).
template <typename T>
Tensor<T> token_slice(const Tensor<T>& x, std::int64_t t0, std::int64_t t1) {
  Shape shape = x.shape;
  const std::int64_t B = shape[0], Tn = shape[1], row = x.size() / (B * Tn), n = t1 - t0;
  shape[1] = n;
  Tensor<T> out(shape);
  for (std::int64_t b = 0; b < B; ++b)
    std::copy_n(x.ptr() + (b * Tn + t0) * row, n * row, out.ptr() + b * n * row);
  return out;
}

// The same length and the same bits.
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}
template <typename T>
bool same_bits(const Tensor<T>& a, const Tensor<T>& b) {
  return same_bits(a.data, b.data);
}
// "" when a and b are the same bits; otherwise what differs, for the failure message: the
// lengths, or the first index that differs with both values, the count of differing
// elements and the largest |a - b|. Use as CHECK(bit_difference(got, want) == "").
template <typename T>
std::string bit_difference(const std::vector<T>& a, const std::vector<T>& b) {
  std::ostringstream s;
  s << std::setprecision(17);
  if (a.size() != b.size()) {
    s << "lengths " << a.size() << " and " << b.size();
    return s.str();
  }
  std::size_t first = a.size(), count = 0, worst = 0;
  double largest = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) == 0) continue;
    if (first == a.size()) first = i;
    ++count;
    const double d = std::abs(double(a[i]) - double(b[i]));
    if (!(d <= largest)) largest = d, worst = i;  // NaN counts as the largest
  }
  if (count == 0) return "";
  s << count << " of " << a.size() << " elements differ; first [" << first << "]: " << a[first]
    << " vs " << b[first] << "; largest |a - b| = " << largest << " at [" << worst << "]";
  return s.str();
}
template <typename T>
std::string bit_difference(const Tensor<T>& a, const Tensor<T>& b) {
  return bit_difference(a.data, b.data);
}

inline Shape output_shape(const GdnProblem& p) {
  return {p.B, p.T, p.Hv, p.V};
}
inline Shape state_shape(const GdnProblem& p) {
  return {p.num_sequences(), p.Hv, p.K, p.V};
}

// Owned gradient tensors shaped like the inputs.
template <typename T>
struct Grads {
  Tensor<T> dq, dk, dv, dg, dbeta, dh0;
  Grads(const GdnProblem& p, bool with_h0)
      : dq({p.B, p.T, p.Hk, p.K}),
        dk({p.B, p.T, p.Hk, p.K}),
        dv({p.B, p.T, p.Hv, p.V}),
        dg({p.B, p.T, p.Hv}),
        dbeta({p.B, p.T, p.Hv}),
        dh0(with_h0 ? state_shape(p) : Shape{0}) {}
  GdnGradView<T> view() {
    return {dq.ptr(), dk.ptr(), dv.ptr(), dg.ptr(), dbeta.ptr(), dh0.empty() ? nullptr : dh0.ptr()};
  }
  std::vector<std::pair<std::string, const Tensor<T>*>> named() const {
    return {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}, {"dg", &dg}, {"dbeta", &dbeta}, {"dh0", &dh0}};
  }
};

// A named test problem.
struct Case {
  std::string name;
  GdnProblem p;
  bool h0 = false;                        // give an initial state
  bool dht = false;                       // give a final-state cotangent
  std::vector<std::int64_t> forget = {};  // tokens with g = -inf (forget_at)
};

// Sets g = -inf ("forget the state") at the given tokens of every batch row and head.
inline void forget_at(GdnInputs<double>& d, const std::vector<std::int64_t>& tokens) {
  const std::int64_t B = d.g.shape[0], T = d.g.shape[1], H = d.g.shape[2];
  for (std::int64_t b = 0; b < B; ++b)
    for (const std::int64_t t : tokens)
      for (std::int64_t h = 0; h < H; ++h)
        d.g.data[(b * T + t) * H + h] = -std::numeric_limits<double>::infinity();
}

inline GdnProblem make_problem(int B, std::int64_t T, int Hk, int Hv, int K, int V, int C = 64,
                               bool l2 = false, std::vector<std::int64_t> cu = {}) {
  GdnProblem p(B, T, Hk, Hv, K, V, C);
  p.l2norm_qk = l2;
  p.cu_seqlens = std::move(cu);
  return p;
}

// A small model config (conv kernel 4, eps 1e-6); init_range large enough that every path
// carries gradient in the finite-difference tests.
inline ModelConfig make_model_config(int vocab, int d, int layers, int I, int Hk, int Hv, int K,
                                     int V, double init_range, bool tied = false) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = d;
  c.num_hidden_layers = layers;
  c.intermediate_size = I;
  c.linear_num_key_heads = Hk;
  c.linear_num_value_heads = Hv;
  c.linear_key_head_dim = K;
  c.linear_value_head_dim = V;
  c.linear_conv_kernel_dim = 4;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = tied;
  c.initializer_range = init_range;
  return c;
}

// One gated attention layer's config: GQA (heads over 2 kv heads), partial RoPE (rotary
// dim 4 of 6: rotated and passed-through parts), large angles at short positions.
inline ModelConfig attention_layer_config(bool bias, int heads = 4) {
  ModelConfig c;
  c.hidden_size = 12;
  c.num_attention_heads = heads;
  c.num_key_value_heads = 2;
  c.head_dim = 6;
  c.partial_rotary_factor = 2.0 / 3.0;
  c.rope_theta = 100.0;
  c.attention_bias = bias;
  c.rms_norm_eps = 1e-6;
  return c;
}

// One sparse MoE block's config: top 2 of 5 experts and a shared expert.
inline ModelConfig moe_layer_config(ModelFamily family, bool norm_topk) {
  ModelConfig c;
  c.family = family;
  c.hidden_size = 8;
  c.num_experts = 5;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 6;
  c.shared_expert_intermediate_size = 7;
  c.norm_topk_prob = norm_topk;
  return c;
}

// Qwen3-Next style: GDN, gated attention (GQA, partial RoPE), GDN, attention; MoE (top 2 of
// 4) everywhere but layer 2; the router loss trained.
inline ModelConfig hybrid_moe_model(bool attention_bias = false, bool norm_topk = true) {
  ModelConfig c = make_model_config(29, 16, 4, 24, 1, 2, 8, 6, 0.3);
  c.layer_types = {LayerType::linear_attention, LayerType::full_attention,
                   LayerType::linear_attention, LayerType::full_attention};
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.partial_rotary_factor = 0.5;
  c.attention_bias = attention_bias;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.norm_topk_prob = norm_topk;
  c.moe_intermediate_size = 10;
  c.shared_expert_intermediate_size = 12;
  c.mlp_only_layers = {2};
  c.output_router_logits = true;
  c.router_aux_loss_coef = 0.3;
  return c;
}

}  // namespace gdn::test
