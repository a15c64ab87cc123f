#include "gdn/local_pass.h"

#include <algorithm>

#include "core/error.h"
#include "gdn/head_groups.h"

namespace gdn {

// One chunk's rows gathered from the strided [B, T, H, D] layouts into contiguous,
// zero-padded C-row blocks, plus the chunk's output / gradient rows before scattering.
template <typename T>
struct LocalPass<T>::RowBuffers {
  int C, K, V;
  std::vector<T> q, k, v, g, beta, dO, o, dq, dk, dv, dg, dbeta;
  RowBuffers(int C_, int K_, int V_) : C(C_), K(K_), V(V_) {
    for (auto* x : {&q, &k, &dq, &dk}) x->resize(std::size_t(C) * K);
    for (auto* x : {&v, &dO, &o, &dv}) x->resize(std::size_t(C) * V);
    for (auto* x : {&g, &beta, &dg, &dbeta}) x->resize(C);
  }
  ChunkRows<T> rows() const { return {q.data(), k.data(), v.data(), g.data(), beta.data()}; }
  ChunkRowGrads<T> grads() { return {dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data()}; }
};

namespace {

// Copies n rows of `width` elements, `stride` apart, into a dense C-row block; rows past
// n become zero (the padding of DESIGN.md section 2).
template <typename T>
void gather(const T* src, std::int64_t stride, int n, int width, int C, T* dst) {
  for (int i = 0; i < n; ++i) std::copy_n(src + i * stride, width, dst + std::size_t(i) * width);
  std::fill(dst + std::size_t(n) * width, dst + std::size_t(C) * width, T(0));
}

template <typename T>
void scatter(const T* src, int n, int width, T* dst, std::int64_t stride) {
  for (int i = 0; i < n; ++i) std::copy_n(src + std::size_t(i) * width, width, dst + i * stride);
}

}  // namespace

template <typename T>
LocalPass<T>::LocalPass(const GdnProblem& p, std::int64_t t0, std::int64_t t1,
                        const GdnTensors<T>& in)
    : p_(p),
      layout_(p, t0, t1),
      in_(in),
      scale_(T(p.scale_value())),
      fsize_(ChunkFactors<T>{p.chunk_size, p.K, p.V}.size()) {}

template <typename T>
void LocalPass<T>::gather_rows(int bh, int c, RowBuffers& buf) const {
  const int C = p_.chunk_size, K = p_.K, V = p_.V, b = bh / p_.Hv, hv = bh % p_.Hv;
  const Chunk& ch = layout_.chunks[c];
  const std::int64_t t = std::int64_t(b) * tokens() + ch.begin;
  const std::int64_t qk_at = (t * p_.Hk + hv / p_.group()) * K, v_at = (t * p_.Hv + hv) * V;
  const std::int64_t qk_stride = std::int64_t(p_.Hk) * K, v_stride = std::int64_t(p_.Hv) * V;
  gather(in_.q + qk_at, qk_stride, ch.rows, K, C, buf.q.data());
  gather(in_.k + qk_at, qk_stride, ch.rows, K, C, buf.k.data());
  gather(in_.v + v_at, v_stride, ch.rows, V, C, buf.v.data());
  gather(in_.g + t * p_.Hv + hv, p_.Hv, ch.rows, 1, C, buf.g.data());
  gather(in_.beta + t * p_.Hv + hv, p_.Hv, ch.rows, 1, C, buf.beta.data());
}

template <typename T>
void LocalPass<T>::prepare() {
  const int C = p_.chunk_size, K = p_.K, V = p_.V;
  const std::int64_t nc = layout_.chunks.size();
  factors_.resize(std::size_t(p_.B) * p_.Hv * nc * fsize_);
  prepared_ = true;
#pragma omp parallel
  {
    ChunkMath<T> math(C, K, V, scale_);
    RowBuffers buf(C, K, V);
#pragma omp for schedule(dynamic)
    for (std::int64_t job = 0; job < std::int64_t(p_.B) * p_.Hv * nc; ++job) {
      const int bh = int(job / nc), c = int(job % nc);
      gather_rows(bh, c, buf);
      math.prepare(buf.rows(), factors(bh, c));
    }
  }
}

template <typename T>
void LocalPass<T>::transition(T* M, T* U) {
  GDN_CHECK(prepared_, "LocalPass::transition called before prepare()");
  const int K = p_.K, V = p_.V;
#pragma omp parallel
  {
    ChunkMath<T> math(p_.chunk_size, K, V, scale_);
#pragma omp for schedule(static)
    for (int bh = 0; bh < p_.B * p_.Hv; ++bh) {
      const int b = bh / p_.Hv, h = bh % p_.Hv;
      T* m = M + std::size_t(bh) * K * K;
      T* u = U + std::size_t(bh) * K * V;
      std::fill(m, m + K * K, T(0));
      std::fill(u, u + K * V, T(0));
      if (layout_.segments.empty()) {  // no tokens: the identity map
        for (int i = 0; i < K; ++i) m[i * K + i] = 1;
        continue;
      }
      // Only the last segment reaches the slice's end; it depends on h_in only when it
      // continues a sequence from the previous slice (then it is the only segment).
      const Segment& s = layout_.segments.back();
      const bool affine = !s.starts;
      if (affine)
        for (int i = 0; i < K; ++i) m[i * K + i] = 1;
      else if (in_.h0)
        std::copy_n(in_.h0 + state_offset(seq_of(s, b), h), K * V, u);
      for (int c = s.first_chunk; c < s.first_chunk + s.num_chunks; ++c) {
        if (affine) math.compose(factors(bh, c), m);
        math.step(factors(bh, c), u, nullptr);
      }
    }
  }
}

template <typename T>
void LocalPass<T>::output(const T* h_in, T* o, T* ht) {
  const int C = p_.chunk_size, K = p_.K, V = p_.V;
  const std::int64_t Tl = tokens();
  states_.assign(std::size_t(p_.B) * p_.Hv * layout_.chunks.size() * K * V, T(0));
  const bool prepared = prepared_;
#pragma omp parallel
  {
    ChunkMath<T> math(C, K, V, scale_);
    RowBuffers buf(C, K, V);
    std::vector<T> h(std::size_t(K) * V), fbuf(prepared ? 0 : fsize_);
#pragma omp for schedule(static)
    for (int bh = 0; bh < p_.B * p_.Hv; ++bh) {
      const int b = bh / p_.Hv, hv = bh % p_.Hv;
      for (const Segment& s : layout_.segments) {
        const int seq = seq_of(s, b);
        if (s.starts && in_.h0)
          std::copy_n(in_.h0 + state_offset(seq, hv), K * V, h.begin());
        else if (!s.starts && h_in)
          std::copy_n(h_in + std::size_t(bh) * K * V, K * V, h.begin());
        else
          std::fill(h.begin(), h.end(), T(0));
        for (int c = s.first_chunk; c < s.first_chunk + s.num_chunks; ++c) {
          std::copy(h.begin(), h.end(), entry_state(bh, c));
          const T* f = prepared ? factors(bh, c) : fbuf.data();
          if (!prepared) {
            gather_rows(bh, c, buf);
            math.prepare(buf.rows(), fbuf.data());
          }
          math.step(f, h.data(), buf.o.data());
          const std::int64_t t = std::int64_t(b) * Tl + layout_.chunks[c].begin;
          scatter(buf.o.data(), layout_.chunks[c].rows, V, o + (t * p_.Hv + hv) * V,
                  std::int64_t(p_.Hv) * V);
        }
        if (s.ends && ht) std::copy(h.begin(), h.end(), ht + state_offset(seq, hv));
      }
    }
  }
}

template <typename T>
void LocalPass<T>::adjoint(const T* dO, const T* dht, T* D) {
  GDN_CHECK(prepared_, "LocalPass::adjoint called before prepare()");
  const int C = p_.chunk_size, K = p_.K, V = p_.V;
  const std::int64_t Tl = tokens();
#pragma omp parallel
  {
    ChunkMath<T> math(C, K, V, scale_);
    std::vector<T> dOc(std::size_t(C) * V);
#pragma omp for schedule(static)
    for (int bh = 0; bh < p_.B * p_.Hv; ++bh) {
      const int b = bh / p_.Hv, hv = bh % p_.Hv;
      T* mu = D + std::size_t(bh) * K * V;
      std::fill(mu, mu + K * V, T(0));
      // Only a first segment that continues a sequence carries gradient to h_in.
      if (layout_.segments.empty() || layout_.segments.front().starts) continue;
      const Segment& s = layout_.segments.front();
      if (s.ends && dht) std::copy_n(dht + state_offset(seq_of(s, b), hv), K * V, mu);
      for (int c = s.first_chunk + s.num_chunks - 1; c >= s.first_chunk; --c) {
        const std::int64_t t = std::int64_t(b) * Tl + layout_.chunks[c].begin;
        gather(dO + (t * p_.Hv + hv) * V, std::int64_t(p_.Hv) * V, layout_.chunks[c].rows, V, C,
               dOc.data());
        math.adjoint(factors(bh, c), mu, dOc.data());
      }
    }
  }
}

template <typename T>
void LocalPass<T>::backward(const T* lambda, const T* dO, const T* dht, GdnGrads<T>& gr) {
  GDN_CHECK(states_.size() == std::size_t(p_.B) * p_.Hv * layout_.chunks.size() * p_.K * p_.V,
            "LocalPass::backward called before output(): the chunk entry states are missing");
  const int C = p_.chunk_size, K = p_.K, V = p_.V, G = p_.group();
  const std::int64_t Tl = tokens();
  const std::int64_t qk_elems = std::int64_t(p_.B) * Tl * p_.Hk * K;
  // dq, dk per value head ([G, B, Tl, Hk, K]), summed into the key heads at the end.
  std::vector<T> dqv(std::size_t(qk_elems) * G), dkv(std::size_t(qk_elems) * G);
#pragma omp parallel
  {
    ChunkMath<T> math(C, K, V, scale_);
    RowBuffers buf(C, K, V);
    std::vector<T> dh(std::size_t(K) * V);
#pragma omp for schedule(static)
    for (int bh = 0; bh < p_.B * p_.Hv; ++bh) {
      const int b = bh / p_.Hv, hv = bh % p_.Hv, hk = hv / G;
      for (auto s = layout_.segments.rbegin(); s != layout_.segments.rend(); ++s) {
        const int seq = seq_of(*s, b);
        if (s->ends && dht)
          std::copy_n(dht + state_offset(seq, hv), K * V, dh.begin());
        else if (!s->ends && lambda)
          std::copy_n(lambda + std::size_t(bh) * K * V, K * V, dh.begin());
        else
          std::fill(dh.begin(), dh.end(), T(0));
        for (int c = s->first_chunk + s->num_chunks - 1; c >= s->first_chunk; --c) {
          const Chunk& ch = layout_.chunks[c];
          const std::int64_t t = std::int64_t(b) * Tl + ch.begin;
          const std::int64_t qk_at = (t * p_.Hk + hk) * K, v_at = (t * p_.Hv + hv) * V;
          const std::int64_t qk_stride = std::int64_t(p_.Hk) * K,
                             v_stride = std::int64_t(p_.Hv) * V;
          gather(in_.q + qk_at, qk_stride, ch.rows, K, C, buf.q.data());
          gather(in_.k + qk_at, qk_stride, ch.rows, K, C, buf.k.data());
          gather(in_.v + v_at, v_stride, ch.rows, V, C, buf.v.data());
          gather(in_.g + t * p_.Hv + hv, p_.Hv, ch.rows, 1, C, buf.g.data());
          gather(in_.beta + t * p_.Hv + hv, p_.Hv, ch.rows, 1, C, buf.beta.data());
          gather(dO + v_at, v_stride, ch.rows, V, C, buf.dO.data());
          math.backward(buf.rows(), entry_state(bh, c), buf.dO.data(), dh.data(), buf.grads());
          const std::int64_t head = std::int64_t(hv % G) * qk_elems;
          scatter(buf.dq.data(), ch.rows, K, dqv.data() + head + qk_at, qk_stride);
          scatter(buf.dk.data(), ch.rows, K, dkv.data() + head + qk_at, qk_stride);
          scatter(buf.dv.data(), ch.rows, V, gr.dv + v_at, v_stride);
          scatter(buf.dg.data(), ch.rows, 1, gr.dg + t * p_.Hv + hv, p_.Hv);
          scatter(buf.dbeta.data(), ch.rows, 1, gr.dbeta + t * p_.Hv + hv, p_.Hv);
        }
        if (s->starts && gr.dh0) std::copy(dh.begin(), dh.end(), gr.dh0 + state_offset(seq, hv));
      }
    }
  }
  sum_head_groups(dqv, qk_elems, G, gr.dq);
  sum_head_groups(dkv, qk_elems, G, gr.dk);
}

template class LocalPass<float>;
template class LocalPass<double>;

}  // namespace gdn
