// Hugging Face safetensors files: the format real checkpoints (Qwen3-Next, Qwen3.5) ship in.
// A file is an 8-byte little-endian header length N, N bytes of JSON header (maybe padded
// with spaces) and the raw little-endian tensor bytes, which the header locates by
// data_offsets relative to the end of the header.
//
// Files are read through a read-only mmap, so a rank that reads a few tensors of a large
// checkpoint only pages in those. Headers are checked in full when a file is opened, and
// every error is a gdn::Error that names the file, the tensor and the bad value. As with
// any mapping, a file truncated in place while open makes reads fault (SIGBUS); files
// replaced by rename, as write_safetensors and the Python library do, are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace gdn {

// The element types of the format, spelled as in the header. F8_* and other newer types
// are rejected as unsupported when a file is opened.
enum class SafetensorsDtype { BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64 };

const char* safetensors_dtype_name(SafetensorsDtype t);
std::size_t safetensors_dtype_size(SafetensorsDtype t);
// The dtype a header string names, or nullopt for one we do not support.
std::optional<SafetensorsDtype> safetensors_dtype_from_name(const std::string& name);

// One tensor's entry in a header: dtype, shape (empty for a scalar) and its bytes
// [begin, end) relative to the start of the data section.
struct TensorInfo {
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  Shape shape;
  std::uint64_t begin = 0, end = 0;

  std::int64_t numel() const { return ::gdn::numel(shape); }
  std::uint64_t nbytes() const { return end - begin; }
};

// One .safetensors file, mapped read-only for the object's lifetime. Reads are const and
// do not change the object, so threads may read tensors at the same time.
class SafetensorsFile {
 public:
  // Maps the file and checks the header as the safetensors library does: every name once,
  // every dtype supported, every shape non-negative, every data_offsets holding numel *
  // itemsize bytes, and the tensors in offset order covering the data section exactly (no
  // overlap, no gap, no bytes after the last). Errors name the entries involved.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // sorted
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // The entry of a tensor; a missing name is an error that lists some of the names there.
  const TensorInfo& info(const std::string& name) const;
  // The "__metadata__" object (empty when the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Converts a float tensor (F16, BF16, F32, F64) into n = numel elements of T (float or
  // double) at dst. F64 into float rounds to nearest; everything else is exact.
  template <typename T>
  void read(const std::string& name, T* dst, std::size_t n) const;
  template <typename T>
  std::vector<T> read(const std::string& name) const;
  // Converts elements [first, first + n) of a float tensor (row-major), touching only
  // their bytes of the mapping.
  template <typename T>
  void read_range(const std::string& name, std::size_t first, std::size_t n, T* dst) const;
  // Converts an integer or BOOL tensor into n = numel int64 values; U64 values above the
  // int64 range are errors.
  void read_int64(const std::string& name, std::int64_t* dst, std::size_t n) const;
  std::vector<std::int64_t> read_int64(const std::string& name) const;
  // The tensor's bytes as stored (little-endian, row-major), valid while the file is open.
  std::span<const std::byte> raw(const std::string& name) const;

 private:
  void parse_header();
  void check_layout(std::uint64_t data_size) const;
  void release() noexcept;

  std::string path_;
  const std::byte* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::size_t data_start_ = 0;  // 8 + header length
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A Hugging Face checkpoint directory: model.safetensors when it is there, else the shards
// that model.safetensors.index.json maps the tensor names to ({"metadata": {...},
// "weight_map": {name: "model-00001-of-00002.safetensors"}}). Shards are opened the first
// time one of their tensors is asked for, each once; that is guarded by a mutex, so threads
// may share one SafetensorsDir.
class SafetensorsDir {
 public:
  explicit SafetensorsDir(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> names() const;  // sorted
  bool has(const std::string& name) const { return shard_of_.count(name) != 0; }
  // The entry of a tensor, from its shard's header (which opens the shard).
  const TensorInfo& info(const std::string& name) const;
  // The file's "__metadata__", or the index's "metadata" with every value that is not a
  // string given as its JSON text ({"total_size": 16} gives "total_size" -> "16").
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The open shard that holds a tensor.
  const SafetensorsFile& file_of(const std::string& name) const;

  template <typename T>
  void read(const std::string& name, T* dst, std::size_t n) const {
    file_of(name).read<T>(name, dst, n);
  }
  template <typename T>
  std::vector<T> read(const std::string& name) const {
    return file_of(name).read<T>(name);
  }
  template <typename T>
  void read_range(const std::string& name, std::size_t first, std::size_t n, T* dst) const {
    file_of(name).read_range<T>(name, first, n, dst);
  }
  void read_int64(const std::string& name, std::int64_t* dst, std::size_t n) const {
    file_of(name).read_int64(name, dst, n);
  }
  std::vector<std::int64_t> read_int64(const std::string& name) const {
    return file_of(name).read_int64(name);
  }

 private:
  void read_index(const std::string& index_path);

  std::string dir_;
  std::string source_;                           // the file the names came from, for messages
  std::map<std::string, std::string> shard_of_;  // tensor name -> shard file name
  std::map<std::string, std::string> metadata_;
  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
  mutable std::map<std::string, SafetensorsFile> open_;  // shard file name -> its file
};

// A tensor to write: numel(shape) elements of dtype at data, little-endian host memory
// (BF16 and F16 as their 16-bit patterns). The data is not copied and must outlive the call.
struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  Shape shape;
  const void* data = nullptr;

  SafetensorsTensor() = default;
  SafetensorsTensor(std::string n, SafetensorsDtype t, Shape s, const void* d)
      : name(std::move(n)), dtype(t), shape(std::move(s)), data(d) {}
  SafetensorsTensor(std::string n, Shape s, const float* d)
      : SafetensorsTensor(std::move(n), SafetensorsDtype::F32, std::move(s), d) {}
  SafetensorsTensor(std::string n, Shape s, const double* d)
      : SafetensorsTensor(std::move(n), SafetensorsDtype::F64, std::move(s), d) {}
};

// Writes a safetensors file: header keys sorted, the tensors' bytes back to back in that
// order (the Python library puts wider dtypes first instead; readers take either), the
// header padded with spaces to a multiple of 8 bytes so the data starts 8-byte aligned,
// "__metadata__" only when there is some. Any known dtype is written as raw bytes.
// The file is written to path + ".tmp", synced and renamed, so readers see either the old
// file or the whole new one; on any failure the temporary is removed and an Error thrown.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace gdn
