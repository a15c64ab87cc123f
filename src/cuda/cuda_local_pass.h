// The CUDA local pass: LocalPass's public API (src/gdn/local_pass.h) with every pointer
// in device memory. The chunk math is the same ChunkKernel source as on the CPU, run by
// one CUDA block per job (CudaExec): prepare is one block per (batch * value head, chunk);
// transition, output, adjoint and backward walk the chunks of one (batch, value head) in
// order, one block each. The segment / chunk tables go to the device once.
#pragma once

#include <cstdint>

#include "cuda/device_vector.h"
#include "gdn/problem.h"
#include "gdn/slice_layout.h"

namespace gdn {

template <typename T>
class CudaLocalPass {
 public:
  // As LocalPass: p global, `in` this slice's tokens (device pointers, q and k already
  // normalised if asked); the views must outlive this object.
  CudaLocalPass(const GdnProblem& p, std::int64_t t0, std::int64_t t1, const GdnTensors<T>& in);

  std::int64_t tokens() const { return layout_.tokens(); }

  void prepare();
  void transition(T* M, T* U);
  // Runs prepare() first when it has not run: on the GPU the factors of all chunks in
  // parallel beat making them inside the sequential walk.
  void output(const T* h_in, T* o, T* ht);
  void adjoint(const T* dO, const T* dht, T* D);
  void backward(const T* lambda, const T* dO, const T* dht, GdnGrads<T>& g);

  // Threads per block of every pass kernel.
  static constexpr int kThreads = 256;

 private:
  // Per-block scratch for `blocks` blocks (grows only); returns the base pointer.
  T* workspace(int blocks);
  int blocks_for(std::int64_t jobs) const;

  GdnProblem p_;
  SliceLayout layout_;
  GdnTensors<T> in_;
  T scale_;
  std::size_t fsize_, ws_per_block_;
  int max_blocks_;
  bool prepared_ = false, have_states_ = false;
  DeviceVector<SliceLayout::Segment> segments_;
  DeviceVector<SliceLayout::Chunk> chunks_;
  DeviceVector<T> factors_;  // [B * Hv, chunks, fsize]
  DeviceVector<T> states_;   // [B * Hv, chunks, K, V]
  DeviceVector<T> ws_;       // [blocks, ws_per_block_]
};

}  // namespace gdn
