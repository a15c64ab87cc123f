// Moving [B, T, ...] tensors between the whole sequence and this rank's contiguous shard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/npy.h"
#include "core/tensor.h"
#include "cp/shard.h"

namespace gdn::kernel_app {

// Elements per token of a [B, T, ...] array (from the trailing dimensions, so an empty
// shard still knows its row size).
inline std::int64_t row_elems(const Shape& s) {
  return numel(Shape(s.begin() + 2, s.end()));
}

// Tokens [s.begin, s.end) of a [B, T, ...] array, converted to T.
template <typename T>
Tensor<T> shard_of(const NpyArray& a, const std::string& what, const Shard& s) {
  const Tensor<T> full = npy_to_tensor<T>(a, what);
  Shape shape = full.shape;
  shape[1] = s.size();
  Tensor<T> out(shape);
  const std::int64_t row = row_elems(full.shape);
  for (std::int64_t b = 0; b < full.shape[0]; ++b)
    std::copy_n(full.ptr() + (b * full.shape[1] + s.begin) * row, s.size() * row,
                out.ptr() + b * s.size() * row);
  return out;
}

// Reassembles a [B, T, ...] tensor on rank 0 from every rank's shard (an empty tensor on
// the other ranks). Shards differ in size (even zero), so each rank contributes a block
// padded to the largest shard. Collective.
template <typename T>
Tensor<T> gather_tokens(Communicator& comm, const Tensor<T>& local, std::int64_t T_global) {
  const int P = comm.size();
  const std::int64_t B = local.shape[0], per = contiguous_shard(T_global, P, 0).size();
  const std::int64_t row = row_elems(local.shape);
  const std::int64_t block = B * per * row;
  std::vector<T> mine(block, T(0)), all(block * P);
  std::copy(local.data.begin(), local.data.end(), mine.begin());
  comm.all_gather(mine.data(), all.data(), sizeof(T) * block, "app.gather_outputs");
  if (comm.rank() != 0) return {};
  Shape shape = local.shape;
  shape[1] = T_global;
  Tensor<T> out(shape);
  for (int r = 0; r < P; ++r) {
    const Shard s = contiguous_shard(T_global, P, r);
    for (std::int64_t b = 0; b < B; ++b)
      std::copy_n(all.data() + r * block + b * s.size() * row, s.size() * row,
                  out.ptr() + (b * T_global + s.begin) * row);
  }
  return out;
}

}  // namespace gdn::kernel_app
