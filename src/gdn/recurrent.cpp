#include "gdn/recurrent.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gdn/head_groups.h"
#include "gdn/qk_norm.h"

namespace gdn {
namespace {

// Strides of the [B, T, H, D] layouts, so the loops below read like the math.
struct Index {
  const GdnProblem& p;
  std::int64_t qk(int b, std::int64_t t, int hk) const {
    return ((std::int64_t(b) * p.T + t) * p.Hk + hk) * p.K;
  }
  std::int64_t vo(int b, std::int64_t t, int h) const {
    return ((std::int64_t(b) * p.T + t) * p.Hv + h) * p.V;
  }
  std::int64_t gb(int b, std::int64_t t, int h) const {
    return (std::int64_t(b) * p.T + t) * p.Hv + h;
  }
  std::int64_t state(int seq, int h) const { return (std::int64_t(seq) * p.Hv + h) * p.K * p.V; }
};

}  // namespace

template <typename T>
void recurrent_forward(const GdnProblem& p, const GdnInputView<T>& raw, T* o,
                       std::type_identity_t<T>* ht) {
  p.validate();
  const QKNormalizer<T, Host> norm(p, p.T, raw);
  const GdnInputView<T>& in = norm.view();
  const Index ix{p};
  const int K = p.K, V = p.V;
  const T s = T(p.scale_value());
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.Hv; ++h) {
      const int hk = h / p.group();
      std::vector<T> S(std::size_t(K) * V), kv(V);
      for (const SequenceRange& r : sequences_of_row(p, b)) {
        if (in.h0)
          std::copy_n(in.h0 + ix.state(r.seq, h), K * V, S.begin());
        else
          std::fill(S.begin(), S.end(), T(0));
        for (std::int64_t t = r.begin; t < r.end; ++t) {
          const T* q = in.q + ix.qk(b, t, hk);
          const T* k = in.k + ix.qk(b, t, hk);
          const T* v = in.v + ix.vo(b, t, h);
          const T decay = std::exp(in.g[ix.gb(b, t, h)]), beta = in.beta[ix.gb(b, t, h)];
          for (T& x : S) x *= decay;
          std::fill(kv.begin(), kv.end(), T(0));
          for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) kv[j] += S[i * V + j] * k[i];
          for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) S[i * V + j] += k[i] * beta * (v[j] - kv[j]);
          T* ot = o + ix.vo(b, t, h);
          std::fill(ot, ot + V, T(0));
          for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) ot[j] += s * S[i * V + j] * q[i];
        }
        if (ht) std::copy(S.begin(), S.end(), ht + ix.state(r.seq, h));
      }
    }
}

template <typename T>
void recurrent_backward(const GdnProblem& p, const GdnInputView<T>& raw, const T* dO,
                        const std::type_identity_t<T>* dht, GdnGradView<T>& gr) {
  p.validate();
  const QKNormalizer<T, Host> norm(p, p.T, raw);
  const GdnInputView<T>& in = norm.view();
  const Index ix{p};
  const int K = p.K, V = p.V, G = p.group();
  const T s = T(p.scale_value());
  const std::int64_t qk_elems = std::int64_t(p.B) * p.T * p.Hk * K;
  // dq, dk per value head, summed over each key head's group at the end (no races).
  std::vector<T> dqv(std::size_t(qk_elems) * G), dkv(std::size_t(qk_elems) * G);
  auto head_grad = [&](std::vector<T>& buf, int b, std::int64_t t, int h) {
    return buf.data() + std::int64_t(h % G) * qk_elems + ix.qk(b, t, h / G);
  };
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.Hv; ++h) {
      const int hk = h / G;
      const std::size_t KV = std::size_t(K) * V;
      std::vector<T> dS(KV), Sa(KV), kv(V), delta(V), ddelta(V), dkvec(V);
      for (const SequenceRange& r : sequences_of_row(p, b)) {
        const std::int64_t n = r.end - r.begin;
        // Keep every state of the sequence: states[t - begin] is S before token t.
        std::vector<T> states((n + 1) * KV, T(0));
        if (in.h0) std::copy_n(in.h0 + ix.state(r.seq, h), KV, states.begin());
        for (std::int64_t t = r.begin; t < r.end; ++t) {
          const T* k = in.k + ix.qk(b, t, hk);
          const T* v = in.v + ix.vo(b, t, h);
          const T decay = std::exp(in.g[ix.gb(b, t, h)]), beta = in.beta[ix.gb(b, t, h)];
          const T* Sp = states.data() + (t - r.begin) * KV;
          T* S = states.data() + (t - r.begin + 1) * KV;
          for (std::size_t x = 0; x < KV; ++x) S[x] = decay * Sp[x];
          std::fill(kv.begin(), kv.end(), T(0));
          for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) kv[j] += S[i * V + j] * k[i];
          for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) S[i * V + j] += k[i] * beta * (v[j] - kv[j]);
        }
        if (dht)
          std::copy_n(dht + ix.state(r.seq, h), KV, dS.begin());
        else
          std::fill(dS.begin(), dS.end(), T(0));
        for (std::int64_t t = r.end - 1; t >= r.begin; --t) {
          const T* q = in.q + ix.qk(b, t, hk);
          const T* k = in.k + ix.qk(b, t, hk);
          const T* v = in.v + ix.vo(b, t, h);
          const T* dot = dO + ix.vo(b, t, h);
          const T decay = std::exp(in.g[ix.gb(b, t, h)]), beta = in.beta[ix.gb(b, t, h)];
          const T* Sp = states.data() + (t - r.begin) * KV;
          const T* S = states.data() + (t - r.begin + 1) * KV;
          T* dq = head_grad(dqv, b, t, h);
          T* dk = head_grad(dkv, b, t, h);
          // o = s S^T q
          for (int i = 0; i < K; ++i) {
            T acc = 0;
            for (int j = 0; j < V; ++j) {
              dS[i * V + j] += s * q[i] * dot[j];
              acc += S[i * V + j] * dot[j];
            }
            dq[i] = s * acc;
          }
          // S = Sa + k delta^T, delta = beta (v - Sa^T k), Sa = decay * Sp
          for (std::size_t x = 0; x < KV; ++x) Sa[x] = decay * Sp[x];
          std::fill(kv.begin(), kv.end(), T(0));
          for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) kv[j] += Sa[i * V + j] * k[i];
          for (int j = 0; j < V; ++j) delta[j] = beta * (v[j] - kv[j]);
          std::fill(ddelta.begin(), ddelta.end(), T(0));
          for (int i = 0; i < K; ++i) {
            T acc = 0;
            for (int j = 0; j < V; ++j) {
              acc += dS[i * V + j] * delta[j];
              ddelta[j] += dS[i * V + j] * k[i];
            }
            dk[i] = acc;
          }
          T dbeta = 0;
          T* dv = gr.dv + ix.vo(b, t, h);
          for (int j = 0; j < V; ++j) {
            dbeta += ddelta[j] * (v[j] - kv[j]);
            dv[j] = beta * ddelta[j];
            dkvec[j] = -beta * ddelta[j];  // gradient of kv = Sa^T k
          }
          gr.dbeta[ix.gb(b, t, h)] = dbeta;
          for (int i = 0; i < K; ++i) {
            T acc = 0;
            for (int j = 0; j < V; ++j) {
              dS[i * V + j] += k[i] * dkvec[j];  // dSa
              acc += Sa[i * V + j] * dkvec[j];
            }
            dk[i] += acc;
          }
          T dg = 0;
          for (std::size_t x = 0; x < KV; ++x) {
            dg += Sa[x] * dS[x];
            dS[x] *= decay;  // dS_prev
          }
          gr.dg[ix.gb(b, t, h)] = dg;
        }
        if (in.h0 && gr.dh0) std::copy(dS.begin(), dS.end(), gr.dh0 + ix.state(r.seq, h));
      }
    }
  // Sum value-head gradients into their key head, then back through the L2 norm.
  sum_head_groups(dqv.data(), qk_elems, G, gr.dq);
  sum_head_groups(dkv.data(), qk_elems, G, gr.dk);
  norm.backward(gr.dq, gr.dk);
}

template void recurrent_forward<float>(const GdnProblem&, const GdnInputView<float>&, float*,
                                       float*);
template void recurrent_forward<double>(const GdnProblem&, const GdnInputView<double>&, double*,
                                        double*);
template void recurrent_backward<float>(const GdnProblem&, const GdnInputView<float>&, const float*,
                                        const float*, GdnGradView<float>&);
template void recurrent_backward<double>(const GdnProblem&, const GdnInputView<double>&,
                                         const double*, const double*, GdnGradView<double>&);

}  // namespace gdn
