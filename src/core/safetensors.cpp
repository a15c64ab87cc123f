#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_reader.h"

namespace gdn {

// Tensor bytes are taken straight from the file, which is little-endian by definition.
static_assert(std::endian::native == std::endian::little, "gdn-cp assumes a little-endian host");

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using D = SafetensorsDtype;

struct DtypeRow {
  D dtype;
  const char* name;
  std::size_t size;
};
constexpr DtypeRow kDtypes[] = {{D::BOOL, "BOOL", 1}, {D::U8, "U8", 1},     {D::I8, "I8", 1},
                                {D::U16, "U16", 2},   {D::I16, "I16", 2},   {D::U32, "U32", 4},
                                {D::I32, "I32", 4},   {D::U64, "U64", 8},   {D::I64, "I64", 8},
                                {D::F16, "F16", 2},   {D::BF16, "BF16", 2}, {D::F32, "F32", 4},
                                {D::F64, "F64", 8}};
constexpr const char* kSupported =
    "BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64";
// A missing name lists this many of the names that are there.
constexpr std::size_t kListedNames = 5;
// Header values are arbitrary JSON: messages show at most this much of one.
constexpr std::size_t kShownChars = 80;

std::string sys_error() {
  return std::strerror(errno);
}

// v as compact ASCII JSON, cut to kShownChars, so a bad value never floods a message.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
  if (s.size() > kShownChars) s = s.substr(0, kShownChars - 3) + "...";
  return s;
}

bool is_float(D t) {
  return t == D::F16 || t == D::BF16 || t == D::F32 || t == D::F64;
}

// "no tensor 'x'; did you mean 'y'? (3 tensors: a, b, c)", for a name that is not there.
std::string missing_name(const std::string& name, const std::vector<std::string>& names) {
  std::string s = "no tensor '" + name + "'";
  const std::string near = closest_key(name, names);
  if (!near.empty()) s += "; did you mean '" + near + "'?";
  s += " (" + std::to_string(names.size()) + " tensors" + (names.empty() ? "" : ": ");
  for (std::size_t i = 0; i < names.size() && i < kListedNames; ++i)
    s += (i ? ", " : "") + names[i];
  if (names.size() > kListedNames) s += ", ...";
  return s + ")";
}

// numel(shape) * itemsize, or nullopt when that does not fit 64 bits. A zero dimension
// makes the tensor empty whatever the others are.
std::optional<std::uint64_t> byte_count(const Shape& shape, std::size_t itemsize) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::uint64_t n = itemsize;
  for (std::int64_t d : shape) {
    if (n > std::numeric_limits<std::uint64_t>::max() / std::uint64_t(d)) return std::nullopt;
    n *= std::uint64_t(d);
  }
  return n;
}

// IEEE binary16 to float, exactly: every half is a float. NaN payloads are kept.
float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  // Rebias the exponent from 15 to 127 and widen the mantissa from 10 to 23 bits.
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

// bfloat16 is the top half of a float.
float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(std::uint32_t(b) << 16);
}

// n elements of Src from (maybe unaligned) bytes into dst, each through f.
template <typename Src, typename T, typename F>
void convert(const std::byte* src, std::size_t n, T* dst, F f) {
  for (std::size_t i = 0; i < n; ++i) {
    Src v;
    std::memcpy(&v, src + i * sizeof(Src), sizeof(Src));
    dst[i] = f(v);
  }
}

template <typename T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  return "int64";
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDtype t) {
  for (const DtypeRow& r : kDtypes)
    if (r.dtype == t) return r.name;
  return "?";
}

std::size_t safetensors_dtype_size(SafetensorsDtype t) {
  for (const DtypeRow& r : kDtypes)
    if (r.dtype == t) return r.size;
  return 0;
}

std::optional<SafetensorsDtype> safetensors_dtype_from_name(const std::string& name) {
  for (const DtypeRow& r : kDtypes)
    if (name == r.name) return r.dtype;
  return std::nullopt;
}

// ---- SafetensorsFile ----

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  GDN_CHECK(fd >= 0, "cannot open safetensors file '", path, "': ", sys_error());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string err = sys_error();
    ::close(fd);
    throw_error("cannot stat safetensors file '", path, "': ", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_error("cannot open safetensors file '", path,
                "': not a regular file (expected a .safetensors file)");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw_error(path, ": the file is ", size,
                " bytes, too short for the 8-byte header length (truncated?)");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string err = p == MAP_FAILED ? sys_error() : "";
  ::close(fd);  // the mapping keeps its own reference to the file
  GDN_CHECK(p != MAP_FAILED, "cannot map safetensors file '", path, "': ", err);
  map_ = static_cast<const std::byte*>(p);
  map_size_ = size;
  try {
    parse_header();
  } catch (...) {
    release();
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  release();
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      map_size_(std::exchange(other.map_size_, 0)),
      data_start_(other.data_start_),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
    data_start_ = other.data_start_;
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

void SafetensorsFile::release() noexcept {
  if (map_) ::munmap(const_cast<std::byte*>(map_), map_size_);
  map_ = nullptr;
  map_size_ = 0;
}

void SafetensorsFile::parse_header() {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(map_[i]);
  GDN_CHECK(n <= map_size_ - 8, path_, ": header length ", n, " beyond the end of the file (",
            map_size_, " bytes)");
  data_start_ = 8 + n;
  const std::uint64_t data_size = map_size_ - data_start_;

  // The top-level entries in file order: a parsed object keeps only the last of two equal
  // keys, and a name given twice must be refused, not resolved.
  std::vector<std::pair<std::string, json>> entries;
  json h;
  try {
    const char* text = reinterpret_cast<const char*>(map_ + 8);
    bool top_object = false;
    const auto collect = [&](int depth, json::parse_event_t ev, json& parsed) {
      using E = json::parse_event_t;
      if (depth == 0 && ev == E::object_start) top_object = true;
      if (depth == 1 && top_object) {
        if (ev == E::key)
          entries.emplace_back(parsed.get<std::string>(), json());
        else if (!entries.empty() && (ev == E::value || ev == E::object_end || ev == E::array_end))
          entries.back().second = parsed;
      }
      return true;
    };
    h = json::parse(text, text + n, collect);  // trailing pad spaces are JSON whitespace
  } catch (const json::exception& e) {
    throw_error(path_, ": the ", n, "-byte header is not valid JSON: ", e.what());
  }
  GDN_CHECK(h.is_object(), path_, ": the header is ", shown(h),
            ", expected a JSON object of tensor entries");

  std::map<std::string, std::size_t> entry_of;  // name -> its position in the header
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& [name, v] = entries[i];
    const auto [first, fresh] = entry_of.emplace(name, i);
    if (!fresh) {
      const json& a = entries[first->second].second;
      const auto offsets = [](const json& e) {
        return e.is_object() && e.contains("data_offsets")
                   ? "data_offsets " + shown(e["data_offsets"])
                   : shown(e);
      };
      throw_error(path_, ": the header gives '", name, "' twice (entry ", first->second + 1, ": ",
                  offsets(a), "; entry ", i + 1, ": ", offsets(v),
                  "); each name may appear once, as the safetensors library requires");
    }
    if (name == "__metadata__") {
      GDN_CHECK(v.is_object(), path_, ": __metadata__ is ", shown(v),
                ", expected an object of strings");
      for (const auto& [key, value] : v.items()) {
        GDN_CHECK(value.is_string(), path_, ": __metadata__ '", key, "' is ", shown(value),
                  ", expected a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = path_ + ": tensor '" + name + "'";
    GDN_CHECK(v.is_object(), where, ": entry is ", shown(v),
              ", expected an object with dtype, shape and data_offsets");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      GDN_CHECK(v.contains(key), where, ": no '", key, "' in ", shown(v));

    TensorInfo t;
    const json& dt = v["dtype"];
    const auto dtype =
        dt.is_string() ? safetensors_dtype_from_name(dt.get<std::string>()) : std::optional<D>();
    GDN_CHECK(dtype, where, ": unsupported dtype ",
              dt.is_string() ? "'" + dt.get<std::string>() + "'" : shown(dt),
              " (supported: ", kSupported, ")");
    t.dtype = *dtype;

    const json& sh = v["shape"];
    GDN_CHECK(sh.is_array(), where, ": shape ", shown(sh), " is not a list of dimensions");
    for (const json& d : sh) {
      GDN_CHECK(
          d.is_number_unsigned() &&
              d.get<std::uint64_t>() <= std::uint64_t(std::numeric_limits<std::int64_t>::max()),
          where, ": shape ", shown(sh), ": dimension ", shown(d), " is not a non-negative integer");
      t.shape.push_back(d.get<std::int64_t>());
    }

    const json& off = v["data_offsets"];
    GDN_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                  off[1].is_number_unsigned(),
              where, ": data_offsets ", shown(off), ", expected [begin, end], two byte offsets");
    t.begin = off[0].get<std::uint64_t>();
    t.end = off[1].get<std::uint64_t>();
    GDN_CHECK(t.begin <= t.end, where, ": data_offsets [", t.begin, ", ", t.end,
              "] end before they begin");
    GDN_CHECK(t.end <= data_size, where, ": data_offsets [", t.begin, ", ", t.end,
              "] beyond the end of the data section (", data_size, " bytes after the ", n,
              "-byte header; the file is ", map_size_, " bytes)");

    const auto want = byte_count(t.shape, safetensors_dtype_size(t.dtype));
    GDN_CHECK(want, where, ": shape ", shape_str(t.shape), " is too large");
    GDN_CHECK(t.nbytes() == *want, where, ": data_offsets [", t.begin, ", ", t.end, "] hold ",
              t.nbytes(), " bytes, expected ", *want, " for ", safetensors_dtype_name(t.dtype),
              " shape ", shape_str(t.shape));
    tensors_.emplace(name, std::move(t));
  }
  check_layout(data_size);
}

// As the safetensors library requires: the tensors, in data_offsets order, tile the data
// section from its first byte to its last, so every byte belongs to exactly one tensor.
void SafetensorsFile::check_layout(std::uint64_t data_size) const {
  std::vector<std::pair<const std::string*, const TensorInfo*>> order;
  for (const auto& [name, t] : tensors_) order.emplace_back(&name, &t);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->begin, a.second->end, *a.first) <
           std::tie(b.second->begin, b.second->end, *b.first);
  });
  const auto entry = [](const auto& e) {
    return "tensor '" + *e.first + "' (data_offsets [" + std::to_string(e.second->begin) + ", " +
           std::to_string(e.second->end) + "])";
  };
  std::uint64_t at = 0;  // where the next tensor must begin
  for (std::size_t i = 0; i < order.size(); ++i) {
    const TensorInfo& t = *order[i].second;
    GDN_CHECK(t.begin >= at, path_, ": ", entry(order[i]), " overlaps ", entry(order[i - 1]),
              "; each byte of the data section must belong to one tensor");
    GDN_CHECK(t.begin == at, path_, ": bytes [", at, ", ", t.begin,
              ") of the data section belong to no tensor: a gap ",
              i == 0 ? std::string("before the first, ") + entry(order[i])
                     : "between " + entry(order[i - 1]) + " and " + entry(order[i]),
              " (the tensors must cover the data section without gaps)");
    at = t.end;
  }
  GDN_CHECK(at == data_size, path_, ": the ", data_size, "-byte data section has ", data_size - at,
            " bytes after ",
            order.empty() ? std::string("the header, which lists no tensor")
                          : "the last tensor, " + entry(order.back()),
            " that belong to no tensor (truncated header, or bytes appended to the file?)");
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw_error(path_, ": ", missing_name(name, names()));
  return it->second;
}

std::span<const std::byte> SafetensorsFile::raw(const std::string& name) const {
  const TensorInfo& t = info(name);
  return {map_ + data_start_ + t.begin, std::size_t(t.nbytes())};
}

template <typename T>
void SafetensorsFile::read(const std::string& name, T* dst, std::size_t n) const {
  const TensorInfo& t = info(name);
  GDN_CHECK(n == std::size_t(t.numel()), path_, ": tensor '", name, "': asked for ", n,
            " elements, it holds ", t.numel(), " (", safetensors_dtype_name(t.dtype), " shape ",
            shape_str(t.shape), ")");
  read_range(name, 0, n, dst);
}

template <typename T>
void SafetensorsFile::read_range(const std::string& name, std::size_t first, std::size_t n,
                                 T* dst) const {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "SafetensorsFile::read: T must be float or double");
  const TensorInfo& t = info(name);
  GDN_CHECK(is_float(t.dtype), path_, ": tensor '", name, "' holds ",
            safetensors_dtype_name(t.dtype), " data; read<", type_name<T>(),
            "> takes F16, BF16, F32 or F64 (use read_int64 for integers)");
  GDN_CHECK(first <= std::size_t(t.numel()) && n <= std::size_t(t.numel()) - first, path_,
            ": tensor '", name, "': asked for elements [", first, ", ", first + n, "), it holds ",
            t.numel(), " (", safetensors_dtype_name(t.dtype), " shape ", shape_str(t.shape), ")");
  const std::byte* src = raw(name).data() + first * safetensors_dtype_size(t.dtype);
  switch (t.dtype) {
    case D::F16:
      convert<std::uint16_t>(src, n, dst, [](std::uint16_t h) { return T(f16_to_float(h)); });
      break;
    case D::BF16:
      convert<std::uint16_t>(src, n, dst, [](std::uint16_t b) { return T(bf16_to_float(b)); });
      break;
    case D::F32:
      convert<float>(src, n, dst, [](float x) { return T(x); });
      break;
    default:  // F64
      convert<double>(src, n, dst, [](double x) { return T(x); });
      break;
  }
}

template <typename T>
std::vector<T> SafetensorsFile::read(const std::string& name) const {
  std::vector<T> out(std::size_t(info(name).numel()));
  read<T>(name, out.data(), out.size());
  return out;
}

void SafetensorsFile::read_int64(const std::string& name, std::int64_t* dst, std::size_t n) const {
  const TensorInfo& t = info(name);
  GDN_CHECK(!is_float(t.dtype), path_, ": tensor '", name, "' holds ",
            safetensors_dtype_name(t.dtype),
            " data; read_int64 takes integers or BOOL (use read<float> or read<double>)");
  GDN_CHECK(n == std::size_t(t.numel()), path_, ": tensor '", name, "': asked for ", n,
            " elements, it holds ", t.numel(), " (", safetensors_dtype_name(t.dtype), " shape ",
            shape_str(t.shape), ")");
  const std::byte* src = raw(name).data();
  const auto widen = [](auto x) { return std::int64_t(x); };
  switch (t.dtype) {
    case D::BOOL:
    case D::U8:
      convert<std::uint8_t>(src, n, dst, widen);
      break;
    case D::I8:
      convert<std::int8_t>(src, n, dst, widen);
      break;
    case D::U16:
      convert<std::uint16_t>(src, n, dst, widen);
      break;
    case D::I16:
      convert<std::int16_t>(src, n, dst, widen);
      break;
    case D::U32:
      convert<std::uint32_t>(src, n, dst, widen);
      break;
    case D::I32:
      convert<std::int32_t>(src, n, dst, widen);
      break;
    case D::I64:
      convert<std::int64_t>(src, n, dst, widen);
      break;
    default:  // U64: the only type whose values may not fit
      for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t v;
        std::memcpy(&v, src + 8 * i, 8);
        GDN_CHECK(v <= std::uint64_t(std::numeric_limits<std::int64_t>::max()), path_, ": tensor '",
                  name, "': element ", i, " = ", v, " does not fit int64");
        dst[i] = std::int64_t(v);
      }
      break;
  }
}

std::vector<std::int64_t> SafetensorsFile::read_int64(const std::string& name) const {
  std::vector<std::int64_t> out(std::size_t(info(name).numel()));
  read_int64(name, out.data(), out.size());
  return out;
}

template void SafetensorsFile::read<float>(const std::string&, float*, std::size_t) const;
template void SafetensorsFile::read<double>(const std::string&, double*, std::size_t) const;
template void SafetensorsFile::read_range<float>(const std::string&, std::size_t, std::size_t,
                                                 float*) const;
template void SafetensorsFile::read_range<double>(const std::string&, std::size_t, std::size_t,
                                                  double*) const;
template std::vector<float> SafetensorsFile::read<float>(const std::string&) const;
template std::vector<double> SafetensorsFile::read<double>(const std::string&) const;

// ---- SafetensorsDir ----

SafetensorsDir::SafetensorsDir(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  GDN_CHECK(fs::is_directory(dir, ec), "checkpoint directory '", dir,
            "' does not exist or is not a directory", ec ? ": " + ec.message() : "");
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  // A name that is there but cannot be followed (a symlink loop, a denied directory, a
  // link to nothing) is reported with the reason, not as missing.
  const auto present = [&](const std::string& p) {
    const bool there = fs::exists(p, ec);
    GDN_CHECK(!ec, "checkpoint directory '", dir, "': cannot open '", p, "': ", ec.message());
    GDN_CHECK(there || !fs::is_symlink(fs::symlink_status(p, ec)), "checkpoint directory '", dir,
              "': '", p, "' is a symbolic link to '", fs::read_symlink(p, ec).string(),
              "', which does not exist");
    return there;
  };
  if (present(single)) {
    source_ = single;
    SafetensorsFile f(single);
    for (const std::string& name : f.names()) shard_of_[name] = "model.safetensors";
    metadata_ = f.metadata();
    open_.emplace("model.safetensors", std::move(f));
  } else if (present(index)) {
    source_ = index;
    read_index(index);
  } else {
    throw_error("checkpoint directory '", dir,
                "' holds neither model.safetensors nor model.safetensors.index.json");
  }
}

void SafetensorsDir::read_index(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  GDN_CHECK(in.good(), "cannot open '", index_path, "': ", sys_error());
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw_error(index_path, ": not valid JSON: ", e.what());
  }
  GDN_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), index_path,
            ": expected an object with a \"weight_map\" object of tensor name -> shard file");
  for (const auto& [name, shard] : j["weight_map"].items()) {
    // Shards sit beside the index; a path elsewhere is a broken (or hostile) index.
    GDN_CHECK(shard.is_string() && !shard.get<std::string>().empty() &&
                  shard.get<std::string>().find('/') == std::string::npos &&
                  shard.get<std::string>() != "." && shard.get<std::string>() != "..",
              index_path, ": weight_map['", name, "'] is ", shown(shard),
              ", expected the file name of a shard in the same directory");
    shard_of_[name] = shard.get<std::string>();
  }
  if (j.contains("metadata")) {
    GDN_CHECK(j["metadata"].is_object(), index_path, ": \"metadata\" is ", shown(j["metadata"]),
              ", expected an object");
    for (const auto& [key, value] : j["metadata"].items())
      metadata_[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
}

std::vector<std::string> SafetensorsDir::names() const {
  std::vector<std::string> out;
  out.reserve(shard_of_.size());
  for (const auto& kv : shard_of_) out.push_back(kv.first);
  return out;
}

const SafetensorsFile& SafetensorsDir::file_of(const std::string& name) const {
  const auto it = shard_of_.find(name);
  if (it == shard_of_.end()) throw_error(source_, ": ", missing_name(name, names()));
  const std::string& shard = it->second;
  std::lock_guard<std::mutex> lock(*mutex_);
  auto f = open_.find(shard);
  if (f == open_.end()) {
    const std::string p = (fs::path(dir_) / shard).string();
    std::error_code ec;
    const bool there = fs::exists(p, ec);
    GDN_CHECK(!ec, source_, ": tensor '", name, "' is in shard '", shard,
              "', which cannot be opened (", p, "): ", ec.message());
    GDN_CHECK(there, source_, ": tensor '", name, "' is in shard '", shard,
              "', which does not exist (", p, ")");
    try {
      f = open_.emplace(shard, SafetensorsFile(p)).first;
    } catch (const Error& e) {
      throw_error(source_, ": tensor '", name, "' is in shard '", shard,
                  "', which cannot be read: ", e.what());
    }
  }
  GDN_CHECK(f->second.has(name), source_, ": tensor '", name, "' is mapped to shard '", shard,
            "', which has no such tensor (it holds ", f->second.names().size(), ")");
  return f->second;
}

const TensorInfo& SafetensorsDir::info(const std::string& name) const {
  return file_of(name).info(name);
}

// ---- write_safetensors ----

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // The data goes in the header's key order, which is nlohmann's sorted std::map order.
  std::map<std::string, const SafetensorsTensor*> by_name;
  for (const SafetensorsTensor& t : tensors) {
    GDN_CHECK(!t.name.empty() && t.name != "__metadata__", "write_safetensors: ", path,
              ": tensor name '", t.name, "' is reserved or empty");
    GDN_CHECK(by_name.emplace(t.name, &t).second, "write_safetensors: ", path, ": tensor '", t.name,
              "' is given twice");
  }
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  std::vector<std::pair<const void*, std::uint64_t>> blocks;
  for (const auto& [name, t] : by_name) {
    const std::string where = "write_safetensors: " + path + ": tensor '" + name + "'";
    for (std::int64_t d : t->shape)
      GDN_CHECK(d >= 0, where, ": negative dimension in shape ", shape_str(t->shape));
    const auto bytes = byte_count(t->shape, safetensors_dtype_size(t->dtype));
    GDN_CHECK(bytes && safetensors_dtype_size(t->dtype) != 0, where, ": shape ",
              shape_str(t->shape), " is too large or dtype is invalid");
    GDN_CHECK(t->data || *bytes == 0, where, ": no data for ", safetensors_dtype_name(t->dtype),
              " shape ", shape_str(t->shape));
    header[name] = {{"dtype", safetensors_dtype_name(t->dtype)},
                    {"shape", t->shape},
                    {"data_offsets", json::array({offset, offset + *bytes})}};
    blocks.emplace_back(t->data, *bytes);
    offset += *bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    throw_error("write_safetensors: ", path,
                ": a tensor name or metadata string is not valid UTF-8: ", e.what());
  }
  // Padding to 8 bytes puts the data, after the 8-byte length, on an 8-byte boundary.
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(std::uint64_t(text.size()) >> (8 * i));

  // A crash leaves the old file (or none), never a torn one.
  AtomicFile file(path, "write_safetensors");
  file.write(len, 8);
  file.write(text.data(), text.size());
  for (const auto& [data, bytes] : blocks) file.write(data, bytes);
  (void)file.commit();  // the file is complete; a directory sync is best effort
}

}  // namespace gdn
