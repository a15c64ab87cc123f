// .npy reader/writer: round trips through our writer, plus hand-built files (bytes typed
// in here, not produced by write_npy) so the reader is checked against the format itself.
#include <unistd.h>

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

namespace {

using test::TempDir;

const TempDir& tmp() {
  static TempDir t("gdn_test_npy");
  return t;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
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
  for (const Shape& shape : shapes) {
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
