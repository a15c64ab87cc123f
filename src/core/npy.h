// NumPy .npy files (format versions 1.0, 2.0 and 3.0): the exchange format between the
// Python reference and gdn-cp. Only little-endian, C-order f32/f64/i32/i64 arrays are
// supported; everything else is rejected with a gdn::Error naming the file and the fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace gdn {

// A raw array as stored on disk: element type, shape (empty for 0-d) and the
// little-endian, row-major element bytes (numel(shape) * dtype_size(dtype) of them).
struct NpyArray {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<char> bytes;
};

// What the header of a .npy file says: element type, shape, and where the element bytes
// lie in the file (data_bytes = numel(shape) * dtype_size(dtype) of them from data_offset).
struct NpyHeader {
  DType dtype = DType::f32;
  Shape shape;
  std::int64_t data_offset = 0;
  std::int64_t data_bytes = 0;
};

// Reads and checks only the header of a .npy file, with every check of read_npy that does
// not need the data itself (the file's size must match the shape exactly), so a caller can
// map a large file and read its elements in place.
NpyHeader read_npy_header(const std::string& path);

// Reads a whole .npy file. Accepts descr '<f4', '<f8', '<i4', '<i8' ('=' and '|' are
// taken as native, which is little-endian on every supported host).
NpyArray read_npy(const std::string& path);

// Reads part of a .npy file whose header h came from read_npy_header(path): the elements
// [begin, begin + count) along `axis`, for every index of the axes before it, i.e. the
// C-order sub-array a[..., begin:begin + count, ...] (its shape is h.shape with
// shape[axis] = count). Those are prod(shape[:axis]) runs of count * prod(shape[axis+1:])
// elements each, and only they are read (pread at their place in the file; one read when
// the runs touch). For a [B, T, ...] array and axis 1 this is a rank's shard along T: B
// runs. count = 0 reads nothing. Throws gdn::Error naming the file for an axis or range
// outside the shape, a file that cannot be opened or read, or one whose size no longer
// matches its header.
NpyArray read_npy_rows(const std::string& path, const NpyHeader& h, int axis, std::int64_t begin,
                       std::int64_t count);

// The flat (C-order) index in the whole array of shape `full` of flat element i of its
// slice [begin, begin + count) along `axis` (as read_npy_rows returns it), so a check of
// one slice can report the index the whole file would give.
std::int64_t npy_slice_flat_index(const Shape& full, int axis, std::int64_t begin,
                                  std::int64_t count, std::int64_t i);

// Converts a raw array to Tensor<T>: f32/f64 to float/double, i32/i64 to int32_t/int64_t.
// Float data into an integer tensor (or the reverse), and i64 values that do not fit an
// int32_t, are errors; `what` names the source in messages (usually the path).
template <typename T>
Tensor<T> npy_to_tensor(const NpyArray& a, const std::string& what);

// read_npy + npy_to_tensor.
template <typename T>
Tensor<T> read_npy_as(const std::string& path);

// Writes a v1.0 .npy (header padded to 64 bytes) atomically (core/atomic_file.h: via
// path + ".tmp", synced and renamed), so readers never see a half-written file. T is float, double,
// int32_t or int64_t.
template <typename T>
void write_npy(const std::string& path, const Tensor<T>& t);

// Flat index of the first element of a float array that is NaN or +-Inf (-Inf is
// accepted when allow_neg_inf), or -1 when there is none; always -1 for integer arrays.
std::int64_t first_nonfinite(const NpyArray& a, bool allow_neg_inf = false);

// The descr string gdn-cp writes for a dtype ("<f4", ...).
const char* npy_descr(DType t);

}  // namespace gdn
