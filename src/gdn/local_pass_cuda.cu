// The passes of LocalPass on the GPU: the chunk math of ops/gdn_chunk run by one CUDA
// block per job (CudaExec). prepare and output_from_states are one block per (batch *
// value head, chunk); transition, output, adjoint and backward walk the chunks of one
// (batch, value head) in order, one block each. Each block's scratch is its slice of the
// pass's workspace.
#include <algorithm>

#include "gdn/pass_args.h"
#include "ops/gdn_chunk/chunk_kernel.h"
#include "ops/gdn_chunk/cuda_exec.cuh"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn::pass {

namespace {

using Segment = SliceLayout::Segment;
using Chunk = SliceLayout::Chunk;
constexpr int kThreads = 256;  // threads per block of every pass kernel

// One block's slice of the workspace: the kernel's scratch, then the chunk's rows.
template <typename T>
struct BlockBuffers {
  T *kernel, *q, *k, *v, *g, *beta, *dO, *o, *dq, *dk, *dv, *dg, *dbeta, *h;

  __host__ __device__ static std::size_t size(int C, int K, int V) {
    const std::size_t CK = std::size_t(C) * K, CV = std::size_t(C) * V;
    return ChunkKernel<T, CudaExec>::workspace_size(C, K, V) + 4 * CK + 4 * CV +
           4 * std::size_t(C) + std::size_t(K) * V;
  }
  __device__ BlockBuffers(const PassArgs<T>& a) {
    const std::size_t CK = std::size_t(a.C) * a.K, CV = std::size_t(a.C) * a.V;
    T* p = a.workspace + blockIdx.x * size(a.C, a.K, a.V);
    auto take = [&p](std::size_t n) {
      T* r = p;
      p += n;
      return r;
    };
    kernel = take(ChunkKernel<T, CudaExec>::workspace_size(a.C, a.K, a.V));
    q = take(CK), k = take(CK), dq = take(CK), dk = take(CK);
    v = take(CV), dO = take(CV), o = take(CV), dv = take(CV);
    g = take(a.C), beta = take(a.C), dg = take(a.C), dbeta = take(a.C);
    h = take(std::size_t(a.K) * a.V);
  }
  __device__ ChunkRows<T> rows() const { return {q, k, v, g, beta}; }
  __device__ ChunkRowGrads<T> grads() const { return {dq, dk, dv, dg, dbeta}; }
};

// Block-cooperative copies. Each leaves the barrier to the caller's next sync point
// (a ChunkKernel call begins with one) unless noted.
template <typename T>
__device__ void block_fill(T* dst, std::int64_t n, T value) {
  for (std::int64_t x = threadIdx.x; x < n; x += blockDim.x) dst[x] = value;
}
template <typename T>
__device__ void block_copy(T* dst, const T* src, std::int64_t n) {
  for (std::int64_t x = threadIdx.x; x < n; x += blockDim.x) dst[x] = src[x];
}
// n rows of `width` elements, `stride` apart, into a dense C-row block, zero past n.
template <typename T>
__device__ void gather(const T* src, std::int64_t stride, int n, int width, int C, T* dst) {
  for (int x = threadIdx.x; x < C * width; x += blockDim.x) {
    const int i = x / width, d = x % width;
    dst[x] = i < n ? src[i * stride + d] : T(0);
  }
}
template <typename T>
__device__ void scatter(const T* src, int n, int width, T* dst, std::int64_t stride) {
  for (int x = threadIdx.x; x < n * width; x += blockDim.x) {
    const int i = x / width, d = x % width;
    dst[i * stride + d] = src[x];
  }
}

// chunk c of (batch, value head) bh into the block's row buffers (local_pass_host.cpp's
// gather_rows).
template <typename T>
__device__ void gather_rows(const PassArgs<T>& a, int bh, std::int64_t c,
                            const BlockBuffers<T>& buf) {
  const int b = bh / a.Hv, hv = bh % a.Hv;
  const Chunk ch = a.chunks[c];
  const std::int64_t t = std::int64_t(b) * a.Tl + ch.begin;
  const std::int64_t qk_at = (t * a.Hk + hv / a.G) * a.K, v_at = (t * a.Hv + hv) * a.V;
  const std::int64_t qk_stride = std::int64_t(a.Hk) * a.K, v_stride = std::int64_t(a.Hv) * a.V;
  gather(a.in.q + qk_at, qk_stride, ch.rows, a.K, a.C, buf.q);
  gather(a.in.k + qk_at, qk_stride, ch.rows, a.K, a.C, buf.k);
  gather(a.in.v + v_at, v_stride, ch.rows, a.V, a.C, buf.v);
  gather(a.in.g + t * a.Hv + hv, a.Hv, ch.rows, 1, a.C, buf.g);
  gather(a.in.beta + t * a.Hv + hv, a.Hv, ch.rows, 1, a.C, buf.beta);
}

template <typename T>
__device__ ChunkKernel<T, CudaExec> kernel_of(const PassArgs<T>& a, const BlockBuffers<T>& buf) {
  return ChunkKernel<T, CudaExec>(a.C, a.K, a.V, a.scale, buf.kernel);
}

template <typename T>
__global__ void prepare_kernel(PassArgs<T> a) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks);
    const std::int64_t c = job % a.num_chunks;
    gather_rows(a, bh, c, buf);
    __syncthreads();
    math.prepare(buf.rows(), a.factors_of(bh, c));  // ends with a barrier
  }
}

template <typename T>
__global__ void transition_kernel(PassArgs<T> a, T* M, T* U) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int K = a.K, V = a.V;
  for (int bh = blockIdx.x; bh < a.B * a.Hv; bh += gridDim.x) {
    const int b = bh / a.Hv, h = bh % a.Hv;
    T* m = M + std::size_t(bh) * K * K;
    T* u = U + std::size_t(bh) * K * V;
    block_fill(m, std::int64_t(K) * K, T(0));
    block_fill(u, std::int64_t(K) * V, T(0));
    __syncthreads();
    // As LocalPass::transition: only the last segment reaches the slice's end.
    const bool empty = a.num_segments == 0;
    const Segment s = empty ? Segment{} : a.segments[a.num_segments - 1];
    const bool affine = empty || !s.starts;
    if (affine)
      for (int i = threadIdx.x; i < K; i += blockDim.x) m[i * K + i] = 1;
    else if (a.in.h0)
      block_copy(u, a.in.h0 + a.state_offset(a.seq_of(s, b), h), std::int64_t(K) * V);
    __syncthreads();
    if (empty) continue;
    for (std::int64_t c = s.first_chunk; c < s.first_chunk + s.num_chunks; ++c) {
      if (affine) math.compose(a.factors_of(bh, c), m);
      math.step(a.factors_of(bh, c), u, nullptr);
    }
  }
}

template <typename T>
__global__ void output_kernel(PassArgs<T> a, const T* h_in, T* o, T* ht) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int K = a.K, V = a.V;
  const std::int64_t KV = std::int64_t(K) * V;
  for (int bh = blockIdx.x; bh < a.B * a.Hv; bh += gridDim.x) {
    const int b = bh / a.Hv, hv = bh % a.Hv;
    for (std::int64_t si = 0; si < a.num_segments; ++si) {
      const Segment s = a.segments[si];
      const int seq = a.seq_of(s, b);
      if (s.starts && a.in.h0)
        block_copy(buf.h, a.in.h0 + a.state_offset(seq, hv), KV);
      else if (!s.starts && h_in)
        block_copy(buf.h, h_in + std::size_t(bh) * KV, KV);
      else
        block_fill(buf.h, KV, T(0));
      __syncthreads();
      for (std::int64_t c = s.first_chunk; c < s.first_chunk + s.num_chunks; ++c) {
        block_copy(a.entry_state(bh, c), buf.h, KV);  // step's entry barrier orders it
        math.step(a.factors_of(bh, c), buf.h, buf.o);
        const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
        scatter(buf.o, a.chunks[c].rows, V, o + (t * a.Hv + hv) * V, std::int64_t(a.Hv) * V);
        __syncthreads();  // the next step overwrites buf.o
      }
      if (s.ends && ht) block_copy(ht + a.state_offset(seq, hv), buf.h, KV);
      __syncthreads();
    }
  }
}

// output_kernel's outputs from the entry states it kept, one block per (batch * value
// head, chunk) job: no chunk waits for the one before. Where the factors are not made
// yet, each job makes its chunk's into the factor buffer first (prepare_kernel's work,
// the same bits), so adjoint() finds them there.
template <typename T>
__global__ void output_from_states_kernel(PassArgs<T> a, T* o, T* ht) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int V = a.V;
  const std::int64_t KV = std::int64_t(a.K) * V;
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks), b = bh / a.Hv, hv = bh % a.Hv;
    const std::int64_t c = job % a.num_chunks;
    if (!a.prepared) {
      gather_rows(a, bh, c, buf);
      __syncthreads();
      math.prepare(buf.rows(), a.factors_of(bh, c));  // ends with a barrier
    }
    block_copy(buf.h, a.entry_state(bh, c), KV);  // step's entry barrier orders it
    math.step(a.factors_of(bh, c), buf.h, buf.o);
    const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
    scatter(buf.o, a.chunks[c].rows, V, o + (t * a.Hv + hv) * V, std::int64_t(a.Hv) * V);
    // The last chunk of a sequence that ends in the slice leaves with its final state.
    const Segment s = a.segments[a.segment_of(c)];
    if (ht && s.ends && c == s.first_chunk + s.num_chunks - 1)
      block_copy(ht + a.state_offset(a.seq_of(s, b), hv), buf.h, KV);
    __syncthreads();  // the next job overwrites the row buffers, buf.h and buf.o
  }
}

template <typename T>
__global__ void adjoint_kernel(PassArgs<T> a, const T* dO, const T* dht, T* D) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int K = a.K, V = a.V;
  const std::int64_t KV = std::int64_t(K) * V;
  for (int bh = blockIdx.x; bh < a.B * a.Hv; bh += gridDim.x) {
    const int b = bh / a.Hv, hv = bh % a.Hv;
    T* mu = D + std::size_t(bh) * KV;
    block_fill(mu, KV, T(0));
    __syncthreads();
    // Only a first segment that continues a sequence carries gradient to h_in.
    if (a.num_segments == 0 || a.segments[0].starts) continue;
    const Segment s = a.segments[0];
    if (s.ends && dht) block_copy(mu, dht + a.state_offset(a.seq_of(s, b), hv), KV);
    __syncthreads();
    for (std::int64_t c = s.first_chunk + s.num_chunks - 1; c >= s.first_chunk; --c) {
      const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
      gather(dO + (t * a.Hv + hv) * V, std::int64_t(a.Hv) * V, a.chunks[c].rows, V, a.C, buf.dO);
      math.adjoint(a.factors_of(bh, c), mu, buf.dO);  // barriers on entry and exit
    }
  }
}

// dq, dk per value head go to dqv, dkv ([G, B, Tl, Hk, K]); summed per group afterwards.
template <typename T>
__global__ void backward_kernel(PassArgs<T> a, const T* lambda, const T* dO, const T* dht,
                                GdnGrads<T> gr, T* dqv, T* dkv) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int K = a.K, V = a.V, G = a.G;
  const std::int64_t KV = std::int64_t(K) * V;
  const std::int64_t qk_elems = std::int64_t(a.B) * a.Tl * a.Hk * K;
  const std::int64_t qk_stride = std::int64_t(a.Hk) * K, v_stride = std::int64_t(a.Hv) * V;
  for (int bh = blockIdx.x; bh < a.B * a.Hv; bh += gridDim.x) {
    const int b = bh / a.Hv, hv = bh % a.Hv, hk = hv / G;
    for (std::int64_t si = a.num_segments - 1; si >= 0; --si) {
      const Segment s = a.segments[si];
      const int seq = a.seq_of(s, b);
      if (s.ends && dht)
        block_copy(buf.h, dht + a.state_offset(seq, hv), KV);
      else if (!s.ends && lambda)
        block_copy(buf.h, lambda + std::size_t(bh) * KV, KV);
      else
        block_fill(buf.h, KV, T(0));
      for (std::int64_t c = s.first_chunk + s.num_chunks - 1; c >= s.first_chunk; --c) {
        const Chunk ch = a.chunks[c];
        const std::int64_t t = std::int64_t(b) * a.Tl + ch.begin;
        const std::int64_t qk_at = (t * a.Hk + hk) * K, v_at = (t * a.Hv + hv) * V;
        gather_rows(a, bh, c, buf);
        gather(dO + v_at, v_stride, ch.rows, V, a.C, buf.dO);
        __syncthreads();
        math.backward(buf.rows(), a.entry_state(bh, c), buf.dO, buf.h, buf.grads());
        const std::int64_t head = std::int64_t(hv % G) * qk_elems;
        scatter(buf.dq, ch.rows, K, dqv + head + qk_at, qk_stride);
        scatter(buf.dk, ch.rows, K, dkv + head + qk_at, qk_stride);
        scatter(buf.dv, ch.rows, V, gr.dv + v_at, v_stride);
        scatter(buf.dg, ch.rows, 1, gr.dg + t * a.Hv + hv, a.Hv);
        scatter(buf.dbeta, ch.rows, 1, gr.dbeta + t * a.Hv + hv, a.Hv);
        __syncthreads();  // the next chunk's gather overwrites the row buffers
      }
      if (s.starts && gr.dh0) block_copy(gr.dh0 + a.state_offset(seq, hv), buf.h, KV);
      __syncthreads();
    }
  }
}

// out[x] = sum over the G blocks of per_head (the key head's gradient).
template <typename T>
__global__ void sum_head_groups_kernel(const T* per_head, std::int64_t n, int G, T* out) {
  for (std::int64_t x = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; x < n;
       x += std::int64_t(gridDim.x) * blockDim.x) {
    T acc = 0;
    for (int j = 0; j < G; ++j) acc += per_head[j * n + x];
    out[x] = acc;
  }
}

int grid_for(std::int64_t n, int threads) {
  return int(std::min<std::int64_t>((n + threads - 1) / threads, 65535));
}

// A few resident blocks per SM; more only multiplies the workspace.
int max_blocks() {
  int device = 0, sms = 0;
  GDN_CUDA_CHECK(cudaGetDevice(&device));
  GDN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return std::max(1, 4 * sms);
}

int blocks_for(std::int64_t jobs) {
  return int(std::max<std::int64_t>(1, std::min<std::int64_t>(jobs, max_blocks())));
}

}  // namespace

bool needs_prepare(Cuda) {
  return true;
}

int grad_scratch_heads(Cuda, int G) {
  return G;
}

template <typename T>
std::size_t workspace_elems(Cuda, const PassArgs<T>& a) {
  // prepare and output_from_states have the most jobs, so they launch the most blocks.
  return std::size_t(
             blocks_for(std::int64_t(a.B) * a.Hv * std::max<std::int64_t>(1, a.num_chunks))) *
         BlockBuffers<T>::size(a.C, a.K, a.V);
}

template <typename T>
void prepare(Cuda, const PassArgs<T>& a) {
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  prepare_kernel<T><<<blocks_for(jobs), kThreads>>>(a);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void transition(Cuda, const PassArgs<T>& a, T* M, T* U) {
  transition_kernel<T><<<blocks_for(a.B * a.Hv), kThreads>>>(a, M, U);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void output(Cuda, const PassArgs<T>& a, const T* h_in, T* o, T* ht) {
  output_kernel<T><<<blocks_for(a.B * a.Hv), kThreads>>>(a, h_in, o, ht);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void output_from_states(Cuda, const PassArgs<T>& a, T* o, T* ht) {
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  output_from_states_kernel<T><<<blocks_for(jobs), kThreads>>>(a, o, ht);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void adjoint(Cuda, const PassArgs<T>& a, const T* dO, const T* dht, T* D) {
  adjoint_kernel<T><<<blocks_for(a.B * a.Hv), kThreads>>>(a, dO, dht, D);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void backward(Cuda, const PassArgs<T>& a, const T* lambda, const T* dO, const T* dht,
              GdnGrads<T>& gr, T* dqv, T* dkv) {
  backward_kernel<T><<<blocks_for(a.B * a.Hv), kThreads>>>(a, lambda, dO, dht, gr, dqv, dkv);
  GDN_CUDA_CHECK(cudaGetLastError());
  const std::int64_t qk_elems = std::int64_t(a.B) * a.Tl * a.Hk * a.K;
  if (qk_elems == 0) return;
  sum_head_groups_kernel<T><<<grid_for(qk_elems, 256), 256>>>(dqv, qk_elems, a.G, gr.dq);
  GDN_CUDA_CHECK(cudaGetLastError());
  sum_head_groups_kernel<T><<<grid_for(qk_elems, 256), 256>>>(dkv, qk_elems, a.G, gr.dk);
  GDN_CUDA_CHECK(cudaGetLastError());
}

GDN_INSTANTIATE_ON(GDN_PASS_OPS, Cuda)

}  // namespace gdn::pass
