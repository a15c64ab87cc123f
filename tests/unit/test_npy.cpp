// .npy reader/writer: round trips through our writer, plus hand-built files (bytes typed
// in here, not produced by write_npy) so the reader is checked against the format itself.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"
#include "test_support.h"

using namespace gdn;
using Catch::Contains;
using gdn::test::read_bytes;
using gdn::test::write_bytes;

namespace {

using test::TempDir;

const TempDir& tmp() {
  static TempDir t("gdn_test_npy");
  return t;
}

// A v1.0 file: magic, version, 2-byte little-endian header length, header, data.
std::string npy_v1(const std::string& header, const std::string& data) {
  std::string s("\x93NUMPY\x01\x00", 8);
  s += static_cast<char>(header.size() & 0xff);
  s += static_cast<char>(header.size() >> 8);
  return s + header + data;
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::size_t i = 0;
  for (float x : v) std::memcpy(&s[4 * i++], &x, 4);
  return s;
}

template <typename T>
Tensor<T> make(Shape shape) {
  Tensor<T> t(shape);
  for (std::int64_t i = 0; i < t.size(); ++i)
    t.data[i] = static_cast<T>(std::is_floating_point_v<T> ? (i * 0.37 - 1.5) : (i * 7 - 3));
  return t;
}

}  // namespace

TEMPLATE_TEST_CASE("write_npy/read_npy_as round trip", "[npy]", float, double, std::int32_t,
                   std::int64_t) {
  const std::vector<Shape> shapes = {{}, {1}, {5}, {2, 3}, {2, 3, 4}, {0}, {3, 0, 2}, {1, 1, 1, 7}};
  const Shape shape = GENERATE_REF(from_range(shapes));
  DYNAMIC_SECTION("shape " << shape_str(shape)) {
    CAPTURE(shape_str(shape));
    auto t = make<TestType>(shape);
    if (std::is_floating_point_v<TestType> && t.size() > 1)
      t.data[1] = std::numeric_limits<TestType>::lowest();  // extreme values survive
    const std::string p = tmp().path("rt.npy");
    write_npy(p, t);
    REQUIRE_FALSE(std::filesystem::exists(p + ".tmp"));
    auto back = read_npy_as<TestType>(p);
    CHECK(back.shape == shape);
    CHECK(back.data == t.data);

    auto raw = read_npy(p);
    CHECK(raw.dtype == dtype_of<TestType>());
    CHECK(raw.shape == shape);
    CHECK(raw.bytes.size() == t.data.size() * sizeof(TestType));

    // Layout matches numpy's: v1.0, header padded so data starts on a 64-byte boundary.
    const std::string b = read_bytes(p);
    REQUIRE(b.size() >= 10);
    CHECK(b.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    const std::size_t hlen =
        static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
    CHECK((10 + hlen) % 64 == 0);
    CHECK(b[10 + hlen - 1] == '\n');
    CHECK(b.size() == 10 + hlen + t.data.size() * sizeof(TestType));
    CHECK_THAT(b.substr(10, hlen),
               Contains(std::string("'descr': '") + npy_descr(dtype_of<TestType>()) + "'"));
  }
}

TEST_CASE("write_npy header text matches numpy's for 0-d, 1-d and n-d", "[npy]") {
  const std::string p = tmp().path("hdr.npy");
  write_npy(p, Tensor<float>(Shape{}));
  CHECK_THAT(read_bytes(p), Contains("'shape': (), }"));
  write_npy(p, Tensor<float>(Shape{4}));
  CHECK_THAT(read_bytes(p), Contains("'shape': (4,), }"));
  write_npy(p, Tensor<double>(Shape{2, 3}));
  CHECK_THAT(read_bytes(p),
             Contains("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }"));
}

TEST_CASE("write_npy replaces an existing file and rejects inconsistent tensors", "[npy]") {
  const std::string p = tmp().path("replace.npy");
  write_npy(p, make<float>({10}));
  write_npy(p, make<float>({2}));
  CHECK(read_npy_as<float>(p).data == make<float>({2}).data);

  Tensor<float> bad;
  bad.shape = {2, 2};
  bad.data = {1, 2, 3};
  REQUIRE_THROWS_WITH(write_npy(p, bad), Contains("holds 4 elements but the tensor has 3"));
  REQUIRE_THROWS_AS(write_npy(tmp().path("no/such/dir/x.npy"), make<float>({1})), Error);
}

TEST_CASE("read_npy parses hand-made '<f4' files", "[npy]") {
  const std::string p = tmp().path("hand.npy");
  SECTION("2x3 C order, numpy-style padded header") {
    std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    h.append(128 - 10 - h.size() - 1, ' ');
    h += '\n';
    write_bytes(p, npy_v1(h, f32_bytes({1.f, 2.5f, -3.f, 0.f, 1e-30f, 6.f})));
    auto t = read_npy_as<float>(p);
    CHECK(t.shape == Shape{2, 3});
    CHECK(t.data == std::vector<float>{1.f, 2.5f, -3.f, 0.f, 1e-30f, 6.f});
    // Widening to double is allowed and exact.
    auto d = read_npy_as<double>(p);
    CHECK(d.data[1] == 2.5);
  }
  SECTION("odd spacing, double quotes, keys in another order, no trailing comma") {
    write_bytes(p, npy_v1("{ \"shape\":(3,) ,\"fortran_order\" : False,'descr':'<f4'}\n",
                          f32_bytes({7.f, 8.f, 9.f})));
    auto t = read_npy_as<float>(p);
    CHECK(t.shape == Shape{3});
    CHECK(t.data == std::vector<float>{7.f, 8.f, 9.f});
  }
  SECTION("0-d scalar") {
    write_bytes(
        p, npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", f32_bytes({42.f})));
    auto t = read_npy_as<float>(p);
    CHECK(t.shape.empty());
    CHECK(t.data == std::vector<float>{42.f});
  }
  SECTION("'=' and '|' byte order mean native") {
    write_bytes(
        p, npy_v1("{'descr': '=f4', 'fortran_order': False, 'shape': (1,), }\n", f32_bytes({3.f})));
    CHECK(read_npy_as<float>(p).data == std::vector<float>{3.f});
  }
  SECTION("version 2.0 and 3.0 use a 4-byte header length") {
    const std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
    for (char major : {'\x02', '\x03'}) {
      std::string s("\x93NUMPY", 6);
      s += major;
      s += '\0';
      s += static_cast<char>(h.size());
      s += std::string(3, '\0');
      write_bytes(p, s + h + f32_bytes({-1.f, 1.f}));
      auto t = read_npy_as<float>(p);
      CHECK(t.data == std::vector<float>{-1.f, 1.f});
    }
  }
  SECTION("shape with a zero-length dim") {
    write_bytes(p, npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 0), }\n", ""));
    auto t = read_npy_as<float>(p);
    CHECK(t.shape == Shape{4, 0});
    CHECK(t.data.empty());
  }
}

TEST_CASE("read_npy reports every malformed input with a precise gdn::Error", "[npy]") {
  const std::string p = tmp().path("bad.npy");
  const std::string good_h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  auto hdr = [](const std::string& descr, const std::string& fortran, const std::string& shape) {
    return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape +
           ", }\n";
  };

  SECTION("missing file") {
    REQUIRE_THROWS_AS(read_npy(tmp().path("nope.npy")), Error);
    REQUIRE_THROWS_WITH(read_npy(tmp().path("nope.npy")),
                        Contains("cannot open file") && Contains("nope.npy"));
  }
  SECTION("a directory") {
    REQUIRE_THROWS_WITH(read_npy(tmp().dir.string()), Contains("cannot open file"));
  }
  SECTION("bad magic") {
    write_bytes(p, "PK\x03\x04 this is a zip file, not npy");
    REQUIRE_THROWS_WITH(read_npy(p), Contains("not a .npy file (bad magic") && Contains(p));
  }
  SECTION("empty file") {
    write_bytes(p, "");
    REQUIRE_THROWS_WITH(read_npy(p), Contains("not a .npy file (bad magic"));
  }
  SECTION("unsupported version") {
    std::string s = npy_v1(good_h, f32_bytes({1.f, 2.f}));
    s[6] = '\x04';
    write_bytes(p, s);
    REQUIRE_THROWS_WITH(read_npy(p), Contains("unsupported .npy version 4.0"));
  }
  SECTION("header length beyond the end of the file") {
    std::string s = npy_v1(good_h, "");
    s[9] = '\x7f';
    write_bytes(p, s);
    REQUIRE_THROWS_WITH(read_npy(p), Contains("truncated header"));
  }
  SECTION("malformed header dicts") {
    for (const std::string& h :
         {std::string("not a dict\n"), std::string("{'descr': '<f4', 'fortran_order': False}\n"),
          std::string("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }\n"),
          std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }\n"),
          std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n"),
          std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,) \n"),
          std::string("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}\n")}) {
      CAPTURE(h);
      write_bytes(p, npy_v1(h, f32_bytes({1.f, 2.f})));
      REQUIRE_THROWS_WITH(read_npy(p), Contains("malformed header"));
    }
  }
  SECTION("a binary header is shown escaped and cut, never raw") {
    std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,) ";
    for (int i = 0; i < 600; ++i) h += char(i % 256);
    write_bytes(p, npy_v1(h + "\n", f32_bytes({1.f, 2.f})));
    try {
      read_npy(p);
      FAIL("read_npy accepted a binary header");
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK_THAT(m, Contains("malformed header") && Contains("\\x00") && Contains("bytes)"));
      CHECK(m.size() < 1200);
      for (char c : m) CHECK((static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
    }
  }
  SECTION("unsupported dtype") {
    for (const std::string d : {"<c8", "|u1", "<f2", "<U3", "|b1", "<u4"}) {
      CAPTURE(d);
      write_bytes(p, npy_v1(hdr(d, "False", "(2,)"), std::string(16, '\0')));
      REQUIRE_THROWS_WITH(read_npy(p), Contains("unsupported dtype '" + d + "'") &&
                                           Contains("'<f4', '<f8', '<i4', '<i8'"));
    }
  }
  SECTION("fortran order") {
    write_bytes(p, npy_v1(hdr("<f4", "True", "(2, 2)"), f32_bytes({1, 2, 3, 4})));
    REQUIRE_THROWS_WITH(read_npy(p),
                        Contains("Fortran order is not supported; save with np.ascontiguousarray"));
  }
  SECTION("big endian") {
    write_bytes(p, npy_v1(hdr(">f8", "False", "(1,)"), std::string(8, '\0')));
    REQUIRE_THROWS_WITH(read_npy(p), Contains("big-endian") && Contains("'>f8'"));
  }
  SECTION("truncated data") {
    write_bytes(p, npy_v1(hdr("<f4", "False", "(2, 3)"), f32_bytes({1, 2, 3, 4, 5})));
    REQUIRE_THROWS_WITH(read_npy(p),
                        Contains("truncated data: expected 24 bytes") && Contains("got 20"));
  }
  SECTION("trailing bytes") {
    write_bytes(p, npy_v1(hdr("<f4", "False", "(1,)"), f32_bytes({1, 2})));
    REQUIRE_THROWS_WITH(read_npy(p), Contains("trailing bytes"));
  }
}

TEST_CASE("read_npy_as converts within a kind and refuses across kinds", "[npy]") {
  const std::string pf = tmp().path("conv_f.npy");
  const std::string pi = tmp().path("conv_i.npy");
  Tensor<double> d(Shape{3});
  d.data = {0.5, -2.25, 1e300};
  write_npy(pf, d);
  auto f = read_npy_as<float>(pf);
  CHECK(f.data[0] == 0.5f);
  CHECK(f.data[1] == -2.25f);
  CHECK(std::isinf(f.data[2]));
  REQUIRE_THROWS_WITH(read_npy_as<std::int32_t>(pf), Contains("holds f64 data, expected integer"));
  REQUIRE_THROWS_WITH(read_npy_as<std::int64_t>(pf), Contains(pf));

  Tensor<std::int64_t> i(Shape{2});
  i.data = {-5, 7};
  write_npy(pi, i);
  CHECK(read_npy_as<std::int32_t>(pi).data == std::vector<std::int32_t>{-5, 7});
  REQUIRE_THROWS_WITH(read_npy_as<float>(pi), Contains("holds i64 data, expected floating-point"));
  i.data = {1, std::int64_t{1} << 40};
  write_npy(pi, i);
  REQUIRE_THROWS_WITH(read_npy_as<std::int32_t>(pi), Contains("does not fit i32"));

  Tensor<std::int32_t> j(Shape{2});
  j.data = {-1, 2147483647};
  write_npy(pi, j);
  CHECK(read_npy_as<std::int64_t>(pi).data == std::vector<std::int64_t>{-1, 2147483647});
}

TEST_CASE("first_nonfinite finds NaN and Inf in float data only, -inf when asked", "[npy]") {
  const std::string p = tmp().path("nan.npy");
  Tensor<float> f(Shape{4}, 1.f);
  write_npy(p, f);
  CHECK(first_nonfinite(read_npy(p)) == -1);
  f.data[3] = std::numeric_limits<float>::quiet_NaN();
  write_npy(p, f);
  CHECK(first_nonfinite(read_npy(p)) == 3);
  Tensor<double> d(Shape{2, 2}, 0.0);
  d.data[1] = -std::numeric_limits<double>::infinity();
  d.data[2] = std::numeric_limits<double>::infinity();
  write_npy(p, d);
  CHECK(first_nonfinite(read_npy(p)) == 1);
  CHECK(first_nonfinite(read_npy(p), /*allow_neg_inf=*/true) == 2);
  write_npy(p, Tensor<std::int32_t>(Shape{3}, -1));  // all-ones bits: not a float NaN
  CHECK(first_nonfinite(read_npy(p)) == -1);
}

// ---------------------------------------------------------------- partial reads

namespace {

// The slice [begin, begin + count) along axis of t, computed in memory: the reference for
// read_npy_rows.
template <typename T>
Tensor<T> slice_of(const Tensor<T>& t, int axis, std::int64_t begin, std::int64_t count) {
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= t.shape[std::size_t(d)];
  for (std::size_t d = std::size_t(axis) + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
  const std::int64_t dim = t.shape[std::size_t(axis)];
  Shape s = t.shape;
  s[std::size_t(axis)] = count;
  Tensor<T> out(s);
  for (std::int64_t o = 0; o < outer; ++o)
    std::copy_n(t.ptr() + (o * dim + begin) * inner, count * inner, out.ptr() + o * count * inner);
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("read_npy_rows reads exactly the sub-array along one axis", "[npy]", float,
                   double, std::int32_t, std::int64_t) {
  const std::string p = tmp().path("slice.npy");
  struct Case {
    Shape shape;
    int axis;
    std::int64_t begin, count;
  };
  // Rows of a 1-D and a 2-D array (one run) at the start, middle and end; shards along T of
  // [B, T, H, D] arrays (B runs); the whole axis (the runs touch); nothing; a middle axis.
  const std::vector<Case> cases = {
      {{10}, 0, 0, 3},           {{10}, 0, 4, 3},           {{10}, 0, 7, 3},
      {{10}, 0, 9, 1},           {{10}, 0, 0, 10},          {{10}, 0, 5, 0},
      {{10}, 0, 10, 0},          {{6, 5}, 0, 0, 2},         {{6, 5}, 0, 2, 3},
      {{6, 5}, 0, 5, 1},         {{3, 20, 2, 4}, 1, 0, 7},  {{3, 20, 2, 4}, 1, 7, 7},
      {{3, 20, 2, 4}, 1, 14, 6}, {{3, 20, 2, 4}, 1, 19, 1}, {{3, 20, 2, 4}, 1, 0, 20},
      {{3, 20, 2, 4}, 1, 20, 0}, {{2, 5, 4}, 1, 1, 3},      {{2, 3, 6}, 2, 2, 3},
      {{1, 9, 3}, 1, 3, 3},      {{4, 0, 2}, 0, 1, 2},      {{2, 3, 0}, 1, 1, 2}};
  const Case c = GENERATE_REF(from_range(cases));
  DYNAMIC_SECTION("shape " << shape_str(c.shape) << " axis " << c.axis << " begin " << c.begin
                           << " count " << c.count) {
    CAPTURE(shape_str(c.shape), c.axis, c.begin, c.count);
    const Tensor<TestType> t = make<TestType>(c.shape);
    write_npy(p, t);
    const NpyHeader h = read_npy_header(p);
    const NpyArray a = read_npy_rows(p, h, c.axis, c.begin, c.count);
    const Tensor<TestType> want = slice_of(t, c.axis, c.begin, c.count);
    CHECK(a.dtype == dtype_of<TestType>());
    CHECK(a.shape == want.shape);
    const Tensor<TestType> got = npy_to_tensor<TestType>(a, p);
    CHECK(got.data == want.data);
    // Each element's flat index in the whole file is where the reference took it from.
    for (std::int64_t i = 0; i < want.size(); ++i) {
      const std::int64_t flat = npy_slice_flat_index(c.shape, c.axis, c.begin, c.count, i);
      REQUIRE(flat >= 0);
      REQUIRE(flat < t.size());
      REQUIRE(t.data[std::size_t(flat)] == got.data[std::size_t(i)]);
    }
  }
}

TEST_CASE("read_npy_rows: the shards of every rank tile the whole array", "[npy]") {
  const std::string p = tmp().path("tile.npy");
  const Tensor<double> t = make<double>({2, 13, 3, 2});
  write_npy(p, t);
  const NpyHeader h = read_npy_header(p);
  for (const int P : {1, 2, 3, 4, 13, 16}) {
    CAPTURE(P);
    std::vector<int> seen(std::size_t(t.size()), 0);
    const std::int64_t per = (13 + P - 1) / P;
    for (int r = 0; r < P; ++r) {
      const std::int64_t b = std::min<std::int64_t>(13, per * r),
                         e = std::min<std::int64_t>(13, per * (r + 1));
      const Tensor<double> s = npy_to_tensor<double>(read_npy_rows(p, h, 1, b, e - b), p);
      for (std::int64_t i = 0; i < s.size(); ++i) {
        const std::int64_t flat = npy_slice_flat_index(t.shape, 1, b, e - b, i);
        REQUIRE(t.data[std::size_t(flat)] == s.data[std::size_t(i)]);
        ++seen[std::size_t(flat)];
      }
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("read_npy_rows reads a v2.0 file and an unaligned header", "[npy]") {
  const std::string p = tmp().path("v2.npy");
  // v2.0: 4-byte header length; a 21-byte header leaves the data unaligned at byte 33.
  const std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }\n";
  std::string s("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) s += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  write_bytes(p, s + h + f32_bytes({0, 1, 2, 3, 4, 5, 6, 7}));
  const NpyHeader hd = read_npy_header(p);
  CHECK(hd.data_offset == 12 + std::int64_t(h.size()));
  const Tensor<float> got = npy_to_tensor<float>(read_npy_rows(p, hd, 0, 1, 2), p);
  CHECK(got.shape == Shape{2, 2});
  CHECK(got.data == std::vector<float>{2, 3, 4, 5});
}

TEST_CASE("read_npy_rows refuses bad axes and ranges and a file that changed", "[npy]") {
  const std::string p = tmp().path("slice_bad.npy");
  write_npy(p, make<float>({2, 5, 3}));
  const NpyHeader h = read_npy_header(p);
  CHECK_THROWS_WITH(read_npy_rows(p, h, 3, 0, 1),
                    Contains(p) && Contains("axis 3 is not an axis of shape [2, 5, 3]"));
  CHECK_THROWS_WITH(read_npy_rows(p, h, -1, 0, 1), Contains("axis -1"));
  CHECK_THROWS_WITH(read_npy_rows(p, h, 1, 3, 3),
                    Contains("elements [3, 6) along axis 1 are outside [0, 5)"));
  CHECK_THROWS_WITH(read_npy_rows(p, h, 1, -1, 2), Contains("elements [-1, 1)"));
  CHECK_THROWS_WITH(read_npy_rows(p, h, 1, 6, 0), Contains("outside [0, 5)"));
  CHECK_THROWS_WITH(read_npy_rows(p, h, 1, 0, -1), Contains("outside [0, 5)"));
  write_npy(tmp().path("scalar.npy"), make<float>({}));
  CHECK_THROWS_WITH(
      read_npy_rows(tmp().path("scalar.npy"), read_npy_header(tmp().path("scalar.npy")), 0, 0, 1),
      Contains("axis 0 is not an axis of shape []"));
  CHECK_THROWS_WITH(npy_slice_flat_index({2, 5, 3}, 1, 1, 2, 12),
                    Contains("index 12 is outside the slice of 12 elements"));

  // The file shrank, or grew, after its header was read.
  std::filesystem::resize_file(p, std::filesystem::file_size(p) - 4);
  CHECK_THROWS_WITH(read_npy_rows(p, h, 1, 0, 2),
                    Contains(p) && Contains("changed after the header was read"));
  std::filesystem::resize_file(p, std::filesystem::file_size(p) + 8);
  CHECK_THROWS_WITH(read_npy_rows(p, h, 1, 0, 2), Contains("changed after the header was read"));
  // Gone: the error names it; an empty slice reads nothing, so it does not care.
  std::filesystem::remove(p);
  CHECK_THROWS_WITH(read_npy_rows(p, h, 1, 0, 2), Contains("cannot open file '" + p + "'"));
  CHECK(read_npy_rows(p, h, 1, 5, 0).shape == Shape{2, 0, 3});
}
