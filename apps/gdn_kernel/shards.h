// Moving [B, T, ...] tensors between the whole sequence and this rank's contiguous shard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/call_sites.h"
#include "comm/communicator.h"
#include "core/tensor.h"
#include "cp/shard.h"

namespace gdn::kernel_app {

// Elements per token of a [B, T, ...] array (from the trailing dimensions, so an empty
// shard still knows its row size).
inline std::int64_t row_elems(const Shape& s) {
  return numel(Shape(s.begin() + 2, s.end()));
}

// Reassembles a [B, T, ...] tensor on rank 0 from every rank's shard (an empty tensor on
// the other ranks). Each rank sends its shard to rank 0 point-to-point, and rank 0 places
// them as they arrive, so no rank but rank 0 ever holds more than its own shard. Collective.
template <typename T>
Tensor<T> gather_tokens(Communicator& comm, const Tensor<T>& local, std::int64_t T_global) {
  constexpr int kTag = 0x6a7;  // only these messages pass between the passes and the writes
  constexpr const char* kSite = app_sites::kGatherOutputs;
  const int P = comm.size();
  if (comm.rank() != 0) {
    comm.send(local.ptr(), sizeof(T) * local.data.size(), 0, kTag, kSite);
    return {};
  }
  const std::int64_t B = local.shape[0], row = row_elems(local.shape);
  Shape shape = local.shape;
  shape[1] = T_global;
  Tensor<T> out(shape);
  std::vector<T> block;
  for (int r = 0; r < P; ++r) {
    const Shard s = contiguous_shard(T_global, P, r);
    const T* src = local.ptr();
    if (r > 0) {
      block.resize(std::size_t(B * s.size() * row));
      comm.recv(block.data(), sizeof(T) * block.size(), r, kTag, kSite);
      src = block.data();
    }
    for (std::int64_t b = 0; b < B; ++b)
      std::copy_n(src + b * s.size() * row, s.size() * row,
                  out.ptr() + (b * T_global + s.begin) * row);
  }
  return out;
}

}  // namespace gdn::kernel_app
