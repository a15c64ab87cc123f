// The passes of LocalPass on the host: OpenMP over (batch row, value head) for the
// sequential walks and over chunks for prepare and output_from_states; one ChunkMath
// (kernel + workspace) per thread. Rows are gathered from the strided [B, T, H, D]
// layouts into dense, zero-padded C-row blocks (the padding of docs/design.md §2) and
// results scattered back.
#include <algorithm>
#include <vector>

#include "gdn/adjoint_walk/chunk_adjoint_walk.h"
#include "gdn/backward/chunk_backward.h"
#include "gdn/chunk/host_exec.h"
#include "gdn/head_groups.h"
#include "gdn/outputs/chunk_outputs.h"
#include "gdn/pass/device_passes.h"
#include "gdn/prepare/chunk_prepare.h"
#include "gdn/state_walk/chunk_state_walk.h"

namespace gdn::pass {

namespace {

// One row of `width` elements: an inline loop the compiler vectorises. A memmove call
// per row (std::copy_n) cost more than the copy itself at rows of 64 to 128 elements.
template <typename T>
inline void copy_row(const T* __restrict src, int width, T* __restrict dst) {
  for (int d = 0; d < width; ++d) dst[d] = src[d];
}

// Copies n rows of `width` elements, `stride` apart, into a dense C-row block; rows past
// n become zero.
template <typename T>
void gather(const T* src, std::int64_t stride, int n, int width, int C, T* dst) {
  for (int i = 0; i < n; ++i) copy_row(src + i * stride, width, dst + std::size_t(i) * width);
  std::fill(dst + std::size_t(n) * width, dst + std::size_t(C) * width, T(0));
}

template <typename T>
void scatter(const T* src, int n, int width, T* dst, std::int64_t stride) {
  for (int i = 0; i < n; ++i) copy_row(src + std::size_t(i) * width, width, dst + i * stride);
}

// One chunk's rows, plus the chunk's output / gradient rows before scattering.
template <typename T>
struct RowBuffers {
  std::vector<T> q, k, v, g, beta, dO, o, dq, dk, dv, dg, dbeta;
  RowBuffers(int C, int K, int V) {
    for (auto* x : {&q, &k, &dq, &dk}) x->resize(std::size_t(C) * K);
    for (auto* x : {&v, &dO, &o, &dv}) x->resize(std::size_t(C) * V);
    for (auto* x : {&g, &beta, &dg, &dbeta}) x->resize(C);
  }
  ChunkRows<T> rows() const { return {q.data(), k.data(), v.data(), g.data(), beta.data()}; }
  ChunkRowGrads<T> grads() { return {dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data()}; }
};

// Where chunk c of (batch row b, value head hv) starts in the [B, Tl, H, D] layouts.
template <typename T>
struct ChunkAt {
  std::int64_t t, qk, v;  // token row, q/k element and v element offsets
  ChunkAt(const PassArgs<T>& a, int b, int hv, std::int64_t c) {
    t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
    qk = (t * a.Hk + hv / a.G) * a.K;
    v = (t * a.Hv + hv) * a.V;
  }
};

// Gathers chunk c of (batch, value head) bh into buf's input rows.
template <typename T>
void gather_rows(const PassArgs<T>& a, int bh, std::int64_t c, RowBuffers<T>& buf) {
  const int b = bh / a.Hv, hv = bh % a.Hv, rows = a.chunks[c].rows;
  const ChunkAt<T> at(a, b, hv, c);
  const std::int64_t qk_stride = std::int64_t(a.Hk) * a.K, v_stride = std::int64_t(a.Hv) * a.V;
  gather(a.in.q + at.qk, qk_stride, rows, a.K, a.C, buf.q.data());
  gather(a.in.k + at.qk, qk_stride, rows, a.K, a.C, buf.k.data());
  gather(a.in.v + at.v, v_stride, rows, a.V, a.C, buf.v.data());
  gather(a.in.g + at.t * a.Hv + hv, a.Hv, rows, 1, a.C, buf.g.data());
  gather(a.in.beta + at.t * a.Hv + hv, a.Hv, rows, 1, a.C, buf.beta.data());
}

}  // namespace

template <typename T>
std::size_t workspace_elems(Host, const PassArgs<T>&) {
  return 0;  // each thread makes its own ChunkMath
}

template <typename T>
void prepare(Host, const PassArgs<T>& a) {
  const std::int64_t nc = a.num_chunks;
#pragma omp parallel
  {
    ChunkMath<T> math(a.C, a.K, a.V, a.scale);
    RowBuffers<T> buf(a.C, a.K, a.V);
#pragma omp for schedule(dynamic)
    for (std::int64_t job = 0; job < std::int64_t(a.B) * a.Hv * nc; ++job) {
      const int bh = int(job / nc);
      const std::int64_t c = job % nc;
      gather_rows(a, bh, c, buf);
      math.prepare(buf.rows(), a.factors_of(bh, c));
    }
  }
}

template <typename T>
void transition(Host, const PassArgs<T>& a, T* M, T* U) {
  const int K = a.K, V = a.V;
#pragma omp parallel
  {
    ChunkMath<T> math(a.C, K, V, a.scale);
    RowBuffers<T> buf(a.C, K, V);
    std::vector<T> fbuf(a.prepared ? 0 : a.fsize);
#pragma omp for schedule(static)
    for (int bh = 0; bh < a.B * a.Hv; ++bh) {
      const int b = bh / a.Hv, h = bh % a.Hv;
      T* m = M + std::size_t(bh) * K * K;
      T* u = U + std::size_t(bh) * K * V;
      std::fill(m, m + K * K, T(0));
      std::fill(u, u + K * V, T(0));
      if (a.num_segments == 0) {  // no tokens: the identity map
        for (int i = 0; i < K; ++i) m[i * K + i] = 1;
        continue;
      }
      // Only the last segment reaches the slice's end; it depends on h_in only when it
      // continues a sequence from the previous slice (then it is the only segment).
      const auto& s = a.segments[a.num_segments - 1];
      const bool affine = !s.starts;
      if (affine)
        for (int i = 0; i < K; ++i) m[i * K + i] = 1;
      else if (a.in.h0)
        std::copy_n(a.in.h0 + a.state_offset(a.seq_of(s, b), h), K * V, u);
      for (std::int64_t c = s.first_chunk; c < s.first_chunk + s.num_chunks; ++c) {
        const T* f = a.prepared ? a.factors_of(bh, c) : fbuf.data();
        if (!a.prepared) {  // the factors on the fly (LocalPass::transition)
          gather_rows(a, bh, c, buf);
          math.prepare(buf.rows(), fbuf.data());
        }
        if (affine) math.compose(f, m);
        math.step(f, u, nullptr);
      }
    }
  }
}

template <typename T>
void output(Host, const PassArgs<T>& a, const T* h_in, T* o, T* ht) {
  const int K = a.K, V = a.V;
#pragma omp parallel
  {
    ChunkMath<T> math(a.C, K, V, a.scale);
    RowBuffers<T> buf(a.C, K, V);
    std::vector<T> h(std::size_t(K) * V), fbuf(a.prepared ? 0 : a.fsize);
#pragma omp for schedule(static)
    for (int bh = 0; bh < a.B * a.Hv; ++bh) {
      const int b = bh / a.Hv, hv = bh % a.Hv;
      for (std::int64_t si = 0; si < a.num_segments; ++si) {
        const auto& s = a.segments[si];
        const int seq = a.seq_of(s, b);
        if (s.starts && a.in.h0)
          std::copy_n(a.in.h0 + a.state_offset(seq, hv), K * V, h.begin());
        else if (!s.starts && h_in)
          std::copy_n(h_in + std::size_t(bh) * K * V, K * V, h.begin());
        else
          std::fill(h.begin(), h.end(), T(0));
        for (std::int64_t c = s.first_chunk; c < s.first_chunk + s.num_chunks; ++c) {
          std::copy(h.begin(), h.end(), a.entry_state(bh, c));
          const T* f = a.prepared ? a.factors_of(bh, c) : fbuf.data();
          if (!a.prepared) {
            gather_rows(a, bh, c, buf);
            math.prepare(buf.rows(), fbuf.data());
          }
          math.step(f, h.data(), buf.o.data());
          const ChunkAt<T> at(a, b, hv, c);
          scatter(buf.o.data(), a.chunks[c].rows, V, o + at.v, std::int64_t(a.Hv) * V);
        }
        if (s.ends && ht) std::copy(h.begin(), h.end(), ht + a.state_offset(seq, hv));
      }
    }
  }
}

// Phase 3 again from the chunk entry states output() kept (activation recomputation):
// the chunks are independent given their entry states, so this runs in parallel over
// (batch, value head, chunk) like prepare. Each job makes its chunk's factors and steps
// a copy of the kept entry state: the same step on the same factors and the same state
// as output(), so the same bits.
template <typename T>
void output_from_states(Host, const PassArgs<T>& a, T* o, T* ht) {
  const int K = a.K, V = a.V;
  const std::int64_t nc = a.num_chunks;
#pragma omp parallel
  {
    ChunkMath<T> math(a.C, K, V, a.scale);
    RowBuffers<T> buf(a.C, K, V);
    std::vector<T> h(std::size_t(K) * V), fbuf(a.prepared ? 0 : a.fsize);
#pragma omp for schedule(dynamic)
    for (std::int64_t job = 0; job < std::int64_t(a.B) * a.Hv * nc; ++job) {
      const int bh = int(job / nc), b = bh / a.Hv, hv = bh % a.Hv;
      const std::int64_t c = job % nc;
      const T* f = a.prepared ? a.factors_of(bh, c) : fbuf.data();
      if (!a.prepared) {
        gather_rows(a, bh, c, buf);
        math.prepare(buf.rows(), fbuf.data());
      }
      const T* entry = a.entry_state(bh, c);
      std::copy(entry, entry + std::size_t(K) * V, h.begin());
      math.step(f, h.data(), buf.o.data());
      const ChunkAt<T> at(a, b, hv, c);
      scatter(buf.o.data(), a.chunks[c].rows, V, o + at.v, std::int64_t(a.Hv) * V);
      // The last chunk of a sequence that ends in the slice leaves with its final state.
      const auto& s = a.segments[a.segment_of(c)];
      if (ht && s.ends && c == s.first_chunk + s.num_chunks - 1)
        std::copy(h.begin(), h.end(), ht + a.state_offset(a.seq_of(s, b), hv));
    }
  }
}

template <typename T>
void adjoint(Host, const PassArgs<T>& a, const T* dO, const T* dht, T* D) {
  const int K = a.K, V = a.V;
#pragma omp parallel
  {
    ChunkMath<T> math(a.C, K, V, a.scale);
    std::vector<T> dOc(std::size_t(a.C) * V);
#pragma omp for schedule(static)
    for (int bh = 0; bh < a.B * a.Hv; ++bh) {
      const int b = bh / a.Hv, hv = bh % a.Hv;
      T* mu = D + std::size_t(bh) * K * V;
      std::fill(mu, mu + K * V, T(0));
      // Only a first segment that continues a sequence carries gradient to h_in.
      if (a.num_segments == 0 || a.segments[0].starts) continue;
      const auto& s = a.segments[0];
      if (s.ends && dht) std::copy_n(dht + a.state_offset(a.seq_of(s, b), hv), K * V, mu);
      for (std::int64_t c = s.first_chunk + s.num_chunks - 1; c >= s.first_chunk; --c) {
        const ChunkAt<T> at(a, b, hv, c);
        gather(dO + at.v, std::int64_t(a.Hv) * V, a.chunks[c].rows, V, a.C, dOc.data());
        math.adjoint(a.factors_of(bh, c), mu, dOc.data());
      }
    }
  }
}

template <typename T>
void backward(Host, const PassArgs<T>& a, const T* lambda, const T* dO, const T* dht,
              GdnGradView<T>& gr, T* dqv, T* dkv) {
  const int K = a.K, V = a.V, G = a.G;
  const std::int64_t qk_elems = std::int64_t(a.B) * a.Tl * a.Hk * K;
  const std::int64_t qk_stride = std::int64_t(a.Hk) * K, v_stride = std::int64_t(a.Hv) * V;
#pragma omp parallel
  {
    ChunkMath<T> math(a.C, K, V, a.scale);
    RowBuffers<T> buf(a.C, K, V);
    std::vector<T> dh(std::size_t(K) * V);
#pragma omp for schedule(static)
    for (int bh = 0; bh < a.B * a.Hv; ++bh) {
      const int b = bh / a.Hv, hv = bh % a.Hv;
      for (std::int64_t si = a.num_segments - 1; si >= 0; --si) {
        const auto& s = a.segments[si];
        const int seq = a.seq_of(s, b);
        if (s.ends && dht)
          std::copy_n(dht + a.state_offset(seq, hv), K * V, dh.begin());
        else if (!s.ends && lambda)
          std::copy_n(lambda + std::size_t(bh) * K * V, K * V, dh.begin());
        else
          std::fill(dh.begin(), dh.end(), T(0));
        for (std::int64_t c = s.first_chunk + s.num_chunks - 1; c >= s.first_chunk; --c) {
          const int rows = a.chunks[c].rows;
          const ChunkAt<T> at(a, b, hv, c);
          gather_rows(a, bh, c, buf);
          gather(dO + at.v, v_stride, rows, V, a.C, buf.dO.data());
          math.backward(buf.rows(), a.entry_state(bh, c), buf.dO.data(), dh.data(), buf.grads());
          // The group's first value head writes dq, dk; the others their scratch blocks.
          const int j = hv % G;
          const std::int64_t head = std::int64_t(j - 1) * qk_elems;
          scatter(buf.dq.data(), rows, K, (j == 0 ? gr.dq : dqv + head) + at.qk, qk_stride);
          scatter(buf.dk.data(), rows, K, (j == 0 ? gr.dk : dkv + head) + at.qk, qk_stride);
          scatter(buf.dv.data(), rows, V, gr.dv + at.v, v_stride);
          scatter(buf.dg.data(), rows, 1, gr.dg + at.t * a.Hv + hv, a.Hv);
          scatter(buf.dbeta.data(), rows, 1, gr.dbeta + at.t * a.Hv + hv, a.Hv);
        }
        if (s.starts && gr.dh0) std::copy(dh.begin(), dh.end(), gr.dh0 + a.state_offset(seq, hv));
      }
    }
  }
  add_head_groups(dqv, qk_elems, G - 1, gr.dq);
  add_head_groups(dkv, qk_elems, G - 1, gr.dk);
}

template std::size_t workspace_elems(Host, const PassArgs<float>&);
template std::size_t workspace_elems(Host, const PassArgs<double>&);
template void prepare(Host, const PassArgs<float>&);
template void prepare(Host, const PassArgs<double>&);
template void transition(Host, const PassArgs<float>&, float*, float*);
template void transition(Host, const PassArgs<double>&, double*, double*);
template void output(Host, const PassArgs<float>&, const float*, float*, float*);
template void output(Host, const PassArgs<double>&, const double*, double*, double*);
template void output_from_states(Host, const PassArgs<float>&, float*, float*);
template void output_from_states(Host, const PassArgs<double>&, double*, double*);
template void adjoint(Host, const PassArgs<float>&, const float*, const float*, float*);
template void adjoint(Host, const PassArgs<double>&, const double*, const double*, double*);
template void backward(Host, const PassArgs<float>&, const float*, const float*, const float*,
                       GdnGradView<float>&, float*, float*);
template void backward(Host, const PassArgs<double>&, const double*, const double*, const double*,
                       GdnGradView<double>&, double*, double*);

}  // namespace gdn::pass

namespace gdn {

// The chunk math on the host, compiled once here with every phase's bodies (host_exec.h
// declares them extern for the other users of HostExec).
template class ChunkKernel<float, HostExec>;
template class ChunkKernel<double, HostExec>;

}  // namespace gdn
