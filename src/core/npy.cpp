#include "core/npy.h"

#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>
#include <type_traits>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/positional_file.h"

namespace gdn {

// We copy element bytes straight between files and memory, so the host must match the
// little-endian layout we read and write.
static_assert(std::endian::native == std::endian::little, "gdn-cp assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr const char* kSupported = "'<f4', '<f8', '<i4', '<i8'";
// The descr of each DType, in DType's order: written as is, read with any host byte order.
constexpr std::array<const char*, 4> kDescr = {"<f4", "<f8", "<i4", "<i8"};
// A malformed header may be binary garbage of any length: messages show at most this much.
constexpr std::size_t kShownHeaderChars = 120;

// s with every byte outside printable ASCII written as \xNN and cut to `max` characters
// (then "... (N bytes)"), so a bad header never puts raw bytes on the terminal.
std::string printable(const std::string& s, std::size_t max) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (out.size() >= max && s.size() > max) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

// A tiny parser for the header, which is a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }. Only the value kinds
// numpy writes (strings, True/False, tuples of ints) are understood.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  void parse(std::string& descr, bool& fortran, Shape& shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        skip_ws();
        if (peek() != '\'' && peek() != '"')
          fail("'descr' is not a string (structured dtypes are not supported; supported: ",
               kSupported, ")");
        descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran = parse_bool();
        have_fortran = true;
      } else if (key == "shape") {
        shape = parse_tuple();
        have_shape = true;
      } else {
        fail("unexpected key '", printable(key, 40),
             "' (expected 'descr', 'fortran_order', 'shape')");
      }
      if (!another('}', "")) break;
    }
    ++i_;  // the closing '}'
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the closing '}' at offset ", i_);
    if (!have_descr || !have_fortran || !have_shape)
      fail("missing key(s):", have_descr ? "" : " 'descr'", have_fortran ? "" : " 'fortran_order'",
           have_shape ? "" : " 'shape'");
  }

 private:
  template <typename... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw_error("read_npy: ", path_, ": malformed header: ", std::forward<Parts>(parts)...,
                " (header: ", printable(s_, kShownHeaderChars), ")");
  }

  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  // After an item of a dict or tuple: true at ',' (taken: more may follow), false at
  // `close` (left for the caller); anything else fails, naming `where`.
  bool another(char close, const char* where) {
    skip_ws();
    if (peek() == ',') {
      ++i_;
      return true;
    }
    if (peek() == close) return false;
    fail("expected ',' or '", close, "'", where, " at offset ", i_);
  }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail("expected '", c, "' at offset ", i_);
    ++i_;
  }

  std::string parse_string() {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string at offset ", i_);
    std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string at offset ", i_);
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }

  bool parse_bool() {
    skip_ws();
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }

  Shape parse_tuple() {
    expect('(');
    Shape out;
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek())))
        fail("shape entries must be non-negative integers (at offset ", i_, ")");
      std::int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) fail("shape entry too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (peek() == 'L') ++i_;  // Python 2 longs, still seen in old files
      out.push_back(v);
      if (!another(')', " in shape")) break;
    }
    ++i_;
    return out;
  }

  const std::string& s_;
  const std::string& path_;
  std::size_t i_ = 0;
};

DType parse_descr(const std::string& descr, const std::string& path) {
  if (descr.size() == 3) {
    const char order = descr[0];
    const std::string kind = descr.substr(1);
    std::size_t t = 0;
    while (t < kDescr.size() && kind != kDescr[t] + 1) ++t;
    const bool known = t < kDescr.size();
    if (known && order == '>')
      throw_error("read_npy: ", path, ": big-endian data ('", descr,
                  "') is not supported; expected little-endian (save with arr.astype('<", kind,
                  "'))");
    // '=' is native and '|' "not applicable": both mean host order, i.e. little-endian.
    if (known && (order == '<' || order == '=' || order == '|')) return DType(t);
  }
  throw_error("read_npy: ", path, ": unsupported dtype '", printable(descr, 40),
              "'; supported: ", kSupported);
}

std::uint32_t le_u32(const unsigned char* p, int n) {
  std::uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

template <typename T>
constexpr bool kSupportedT = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                             std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;

// Copies n elements of type Src from raw bytes into dst, converting to T.
template <typename T, typename Src>
void convert(const char* src, std::size_t n, T* dst, const std::string& what) {
  for (std::size_t i = 0; i < n; ++i) {
    Src v;
    std::memcpy(&v, src + i * sizeof(Src), sizeof(Src));
    if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(Src)) {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
        throw_error(what, ": element ", i, " = ", v, " does not fit ", dtype_name(dtype_of<T>()));
    }
    dst[i] = static_cast<T>(v);
  }
}

}  // namespace

const char* npy_descr(DType t) {
  return kDescr[std::size_t(t)];
}

NpyHeader read_npy_header(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw_error("read_npy: cannot open file '", path, "': it is a directory, expected a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw_error("read_npy: cannot open file '", path, "': ", std::strerror(errno),
                " (expected a readable .npy file)");
  in.seekg(0, std::ios::end);
  const std::int64_t file_size = in.tellg();
  in.seekg(0, std::ios::beg);

  // Magic (6), version (2), header length (2 for v1, 4 for v2/v3).
  unsigned char pre[12] = {};
  in.read(reinterpret_cast<char*>(pre), 8);
  if (in.gcount() < static_cast<std::streamsize>(kMagicLen) ||
      std::memcmp(pre, kMagic, kMagicLen) != 0)
    throw_error("read_npy: ", path, ": not a .npy file (bad magic; expected \\x93NUMPY)");
  if (in.gcount() < 8) throw_error("read_npy: ", path, ": truncated preamble (no version bytes)");
  const int major = pre[6], minor = pre[7];
  if (minor != 0 || major < 1 || major > 3)
    throw_error("read_npy: ", path, ": unsupported .npy version ", major, ".", minor,
                " (expected 1.0, 2.0 or 3.0)");
  const int len_bytes = major == 1 ? 2 : 4;
  in.read(reinterpret_cast<char*>(pre + 8), len_bytes);
  if (in.gcount() < len_bytes)
    throw_error("read_npy: ", path, ": truncated preamble (no header length)");
  const std::int64_t header_len = le_u32(pre + 8, len_bytes);
  const std::int64_t data_start = 8 + len_bytes + header_len;
  if (data_start > file_size)
    throw_error("read_npy: ", path, ": truncated header: expected ", header_len, " bytes, got ",
                file_size - 8 - len_bytes);
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);

  std::string descr;
  bool fortran = false;
  NpyHeader h;
  HeaderParser(header, path).parse(descr, fortran, h.shape);
  h.dtype = parse_descr(descr, path);
  if (fortran)
    throw_error("read_npy: ", path,
                ": Fortran order is not supported; save with np.ascontiguousarray");

  // Guard numel * itemsize against overflow before trusting it as a byte count.
  std::int64_t n = 1;
  for (std::int64_t d : h.shape) {
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / 8 / d)
      throw_error("read_npy: ", path, ": shape ", shape_str(h.shape), " is too large");
    n *= d;
  }
  const std::int64_t want = n * static_cast<std::int64_t>(dtype_size(h.dtype));
  const std::int64_t have = file_size - data_start;
  if (have < want)
    throw_error("read_npy: ", path, ": truncated data: expected ", want, " bytes for ",
                npy_descr(h.dtype), " shape ", shape_str(h.shape), ", got ", have);
  // np.save never leaves trailing bytes, so extra bytes mean a corrupt or mislabeled file.
  if (have > want)
    throw_error("read_npy: ", path, ": ", have - want, " unexpected trailing bytes (expected ",
                want, " data bytes for ", npy_descr(h.dtype), " shape ", shape_str(h.shape), ")");
  h.data_offset = data_start;
  h.data_bytes = want;
  return h;
}

NpyArray read_npy(const std::string& path) {
  const NpyHeader h = read_npy_header(path);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw_error("read_npy: cannot open file '", path, "': ", std::strerror(errno),
                " (expected a readable .npy file)");
  in.seekg(h.data_offset, std::ios::beg);
  NpyArray a;
  a.dtype = h.dtype;
  a.shape = h.shape;
  a.bytes.resize(static_cast<std::size_t>(h.data_bytes));
  in.read(a.bytes.data(), h.data_bytes);
  if (in.gcount() != h.data_bytes)
    throw_error("read_npy: ", path, ": read error: expected ", h.data_bytes, " bytes, got ",
                in.gcount());
  return a;
}

namespace {

// Elements of the axes before `axis`, and bytes of one index of `axis` (the axes after it).
std::int64_t elems_before(const Shape& s, int axis) {
  std::int64_t n = 1;
  for (int d = 0; d < axis; ++d) n *= s[std::size_t(d)];
  return n;
}
std::int64_t elems_after(const Shape& s, int axis) {
  std::int64_t n = 1;
  for (std::size_t d = std::size_t(axis) + 1; d < s.size(); ++d) n *= s[d];
  return n;
}

void check_slice(const std::string& what, const Shape& shape, int axis, std::int64_t begin,
                 std::int64_t count) {
  if (axis < 0 || std::size_t(axis) >= shape.size())
    throw_error(what, ": axis ", axis, " is not an axis of shape ", shape_str(shape));
  const std::int64_t dim = shape[std::size_t(axis)];
  if (begin < 0 || count < 0 || begin > dim - count)
    throw_error(what, ": elements [", begin, ", ", begin + count, ") along axis ", axis,
                " are outside [0, ", dim, ") of shape ", shape_str(shape));
}

}  // namespace

NpyArray read_npy_rows(const std::string& path, const NpyHeader& h, int axis, std::int64_t begin,
                       std::int64_t count) {
  check_slice("read_npy_rows: " + path, h.shape, axis, begin, count);
  NpyArray a;
  a.dtype = h.dtype;
  a.shape = h.shape;
  a.shape[std::size_t(axis)] = count;
  const std::int64_t dim = h.shape[std::size_t(axis)];
  const std::int64_t outer = elems_before(h.shape, axis);
  const std::int64_t row = elems_after(h.shape, axis) * std::int64_t(dtype_size(h.dtype));
  const std::int64_t run = count * row;  // bytes of one run
  a.bytes.resize(std::size_t(outer * run));
  if (a.bytes.empty()) return a;
  const PositionalFile f(path, "read_npy: ", "file", "expected a readable .npy file",
                         "a .npy file");
  const std::string short_note = "the file is shorter than its header says";
  const std::int64_t size = f.size();
  if (size != h.data_offset + h.data_bytes)
    throw_error("read_npy: ", path, ": the file has ", size, " bytes, but its header said ",
                h.data_offset + h.data_bytes, ": it changed after the header was read");
  if (count == dim || outer == 1) {  // the runs touch: one read
    f.read(a.bytes.data(), outer * run, h.data_offset + begin * row, short_note);
    return a;
  }
  for (std::int64_t o = 0; o < outer; ++o)
    f.read(a.bytes.data() + o * run, run, h.data_offset + (o * dim + begin) * row, short_note);
  return a;
}

std::int64_t npy_slice_flat_index(const Shape& full, int axis, std::int64_t begin,
                                  std::int64_t count, std::int64_t i) {
  check_slice("npy_slice_flat_index", full, axis, begin, count);
  const std::int64_t inner = elems_after(full, axis);
  const std::int64_t run = count * inner;
  GDN_CHECK(i >= 0 && i < elems_before(full, axis) * run, "npy_slice_flat_index: index ", i,
            " is outside the slice of ", elems_before(full, axis) * run, " elements");
  const std::int64_t o = i / run, within = i % run;
  return (o * full[std::size_t(axis)] + begin) * inner + within;
}

template <typename T>
Tensor<T> npy_to_tensor(const NpyArray& a, const std::string& what) {
  static_assert(kSupportedT<T>, "npy_to_tensor: T must be float, double, int32_t or int64_t");
  const bool src_float = a.dtype == DType::f32 || a.dtype == DType::f64;
  if (src_float != std::is_floating_point_v<T>)
    throw_error(what, ": holds ", dtype_name(a.dtype), " data, expected ",
                std::is_floating_point_v<T> ? "floating-point (f32/f64)" : "integer (i32/i64)",
                " for a ", dtype_name(dtype_of<T>()), " tensor");
  const std::size_t n = static_cast<std::size_t>(numel(a.shape));
  GDN_CHECK(a.bytes.size() == n * dtype_size(a.dtype), what, ": ", a.bytes.size(),
            " bytes for shape ", shape_str(a.shape), ", expected ", n * dtype_size(a.dtype));
  Tensor<T> t;
  t.shape = a.shape;
  t.data.resize(n);
  switch (a.dtype) {
    case DType::f32:
      convert<T, float>(a.bytes.data(), n, t.ptr(), what);
      break;
    case DType::f64:
      convert<T, double>(a.bytes.data(), n, t.ptr(), what);
      break;
    case DType::i32:
      convert<T, std::int32_t>(a.bytes.data(), n, t.ptr(), what);
      break;
    case DType::i64:
      convert<T, std::int64_t>(a.bytes.data(), n, t.ptr(), what);
      break;
    case DType::bf16:  // numpy has no bf16: read_npy never makes one
      throw_error(what, ": bf16 .npy data is not supported");
  }
  return t;
}

template <typename T>
Tensor<T> read_npy_as(const std::string& path) {
  return npy_to_tensor<T>(read_npy(path), "read_npy: " + path);
}

template <typename T>
void write_npy(const std::string& path, const Tensor<T>& t) {
  static_assert(kSupportedT<T>, "write_npy: T must be float, double, int32_t or int64_t");
  for (std::int64_t d : t.shape)
    GDN_CHECK(d >= 0, "write_npy: ", path, ": negative dimension in shape ", shape_str(t.shape));
  GDN_CHECK(numel(t.shape) == t.size(), "write_npy: ", path, ": shape ", shape_str(t.shape),
            " holds ", numel(t.shape), " elements but the tensor has ", t.size());

  std::string dict = std::string("{'descr': '") + npy_descr(dtype_of<T>()) +
                     "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < t.shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(t.shape[i]);
  dict += t.shape.size() == 1 ? ",), }" : "), }";
  // numpy pads with spaces so the data starts 64-byte aligned, and ends the header in '\n'.
  // v1.0 stores the header length in 16 bits; only absurd ranks need v2.0's 32 bits.
  const int len_bytes = dict.size() + 1 + 10 <= 65535 ? 2 : 4;
  const std::size_t pre = 8 + len_bytes;
  const std::size_t total = (pre + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - pre - dict.size() - 1, ' ');
  dict += '\n';

  std::string head(kMagic, kMagicLen);
  head += static_cast<char>(len_bytes == 2 ? 1 : 2);
  head += '\0';
  for (int i = 0; i < len_bytes; ++i) head += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  head += dict;

  // A crash leaves the old file (or none), never a torn one.
  AtomicFile file(path, "write_npy");
  file.write(head.data(), head.size());
  file.write(t.ptr(), t.data.size() * sizeof(T));
  (void)file.commit();  // the file is complete; a directory sync is best effort
}

namespace {
template <typename F>
std::int64_t first_nonfinite_as(const NpyArray& a, bool allow_neg_inf) {
  const std::int64_t n = std::int64_t(a.bytes.size() / sizeof(F));
  for (std::int64_t i = 0; i < n; ++i) {
    F x;
    std::memcpy(&x, a.bytes.data() + i * sizeof(F), sizeof(F));
    if (!std::isfinite(x) && !(allow_neg_inf && std::isinf(x) && x < 0)) return i;
  }
  return -1;
}
}  // namespace

std::int64_t first_nonfinite(const NpyArray& a, bool allow_neg_inf) {
  if (a.dtype == DType::f32) return first_nonfinite_as<float>(a, allow_neg_inf);
  if (a.dtype == DType::f64) return first_nonfinite_as<double>(a, allow_neg_inf);
  return -1;
}

#define GDN_NPY_INSTANTIATE(T)                                              \
  template Tensor<T> npy_to_tensor<T>(const NpyArray&, const std::string&); \
  template Tensor<T> read_npy_as<T>(const std::string&);                    \
  template void write_npy<T>(const std::string&, const Tensor<T>&);
GDN_NPY_INSTANTIATE(float)
GDN_NPY_INSTANTIATE(double)
GDN_NPY_INSTANTIATE(std::int32_t)
GDN_NPY_INSTANTIATE(std::int64_t)
#undef GDN_NPY_INSTANTIATE

}  // namespace gdn
