// safetensors reader/writer. The reader is checked against files composed byte by byte here
// (length, JSON text and hand-encoded little-endian values), not against our writer; the
// writer against an exact expected byte string, then through round trips.
#include <unistd.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/safetensors.h"
#include "test_support.h"

using namespace gdn;
using Catch::Contains;
using gdn::test::error_of;
using gdn::test::read_bytes;
using gdn::test::write_bytes;

namespace {

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("gdn_test_safetensors") {}
  // A fresh, empty subdirectory.
  std::string subdir(const std::string& name) const {
    std::filesystem::remove_all(dir / name);
    std::filesystem::create_directories(dir / name);
    return path(name);
  }
};

const TempDir& tmp() {
  static TempDir t;
  return t;
}

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A whole file: 8-byte little-endian header length, the header text, the data.
std::string st_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// 16-bit patterns, low byte first.
std::string u16_bytes(std::initializer_list<std::uint16_t> v) {
  std::string s;
  for (std::uint16_t x : v) {
    s += static_cast<char>(x & 0xff);
    s += static_cast<char>(x >> 8);
  }
  return s;
}

template <typename T>
std::string raw_bytes(std::initializer_list<T> v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::size_t i = 0;
  for (T x : v) std::memcpy(&s[sizeof(T) * i++], &x, sizeof(T));
  return s;
}

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}
std::uint64_t bits(double x) {
  return std::bit_cast<std::uint64_t>(x);
}

// "t<s>", built by appending: GCC 12 warns falsely (-Wrestrict) on "t" + std::to_string(s).
std::string tensor_name(std::size_t s) {
  std::string n = "t";
  n += std::to_string(s);
  return n;
}

}  // namespace

TEST_CASE("SafetensorsFile decodes a hand-made file exactly", "[safetensors]") {
  const std::string p = tmp().path("hand.safetensors");
  // Data: bf16 [2, 2] at 0..8, f16 [10] at 8..28, f32 [3] at 28..40, f64 [2] at 40..56.
  // Offsets deliberately follow neither key order nor alignment.
  const std::string data =
      u16_bytes({0x3F80, 0xC000, 0x7F80, 0x0001}) +
      u16_bytes({0x3C00, 0x0001, 0x03FF, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x8000, 0xC000, 0x3555}) +
      raw_bytes<float>({1.5f, -0.0f, std::numeric_limits<float>::denorm_min()}) +
      raw_bytes<double>({0.1, -1e300});
  std::string header = R"({"w_f64": {"dtype": "F64", "shape": [2], "data_offsets": [40, 56]},)"
                       R"( "__metadata__": {"format": "pt", "note": "hand made"},)"
                       R"( "a_bf16": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},)"
                       R"( "z_f32": {"dtype": "F32", "shape": [3], "data_offsets": [28, 40]},)"
                       R"( "m_f16": {"shape": [10], "dtype": "F16", "data_offsets": [8, 28]}})";
  header.append(21, ' ');  // writers pad with spaces
  write_bytes(p, st_file(header, data));

  const SafetensorsFile f(p);
  CHECK(f.path() == p);
  CHECK(f.names() == std::vector<std::string>{"a_bf16", "m_f16", "w_f64", "z_f32"});
  CHECK(f.has("m_f16"));
  CHECK_FALSE(f.has("__metadata__"));
  CHECK(f.metadata() ==
        std::map<std::string, std::string>{{"format", "pt"}, {"note", "hand made"}});
  const TensorInfo& bf = f.info("a_bf16");
  CHECK(bf.dtype == SafetensorsDtype::BF16);
  CHECK(bf.shape == Shape{2, 2});
  CHECK(bf.begin == 0);
  CHECK(bf.end == 8);
  CHECK(bf.numel() == 4);
  CHECK(f.info("m_f16").shape == Shape{10});
  CHECK(f.raw("z_f32").size() == 12);
  CHECK(std::memcmp(f.raw("z_f32").data(), data.data() + 28, 12) == 0);

  SECTION("element ranges, as a rank reads its part") {
    float r[3];
    f.read_range<float>("m_f16", 4, 3, r);  // 0x7C00, 0xFC00, 0x7E00
    CHECK(r[0] == std::numeric_limits<float>::infinity());
    CHECK(r[1] == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(r[2]));
    double d[2];
    f.read_range<double>("a_bf16", 1, 2, d);
    CHECK((d[0] == -2.0 && d[1] == std::numeric_limits<double>::infinity()));
    f.read_range<double>("w_f64", 1, 1, d);
    CHECK(d[0] == -1e300);
    f.read_range<double>("z_f32", 3, 0, d);  // empty, at the end
    CHECK_THROWS_WITH(f.read_range<double>("z_f32", 2, 2, d),
                      Contains("tensor 'z_f32': asked for elements [2, 4), it holds 3"));
  }
  SECTION("BF16") {
    const auto v = f.read<float>("a_bf16");
    REQUIRE(v.size() == 4);
    CHECK(v[0] == 1.0f);
    CHECK(v[1] == -2.0f);
    CHECK(v[2] == std::numeric_limits<float>::infinity());
    CHECK(v[3] == std::ldexp(1.0f, -133));  // the smallest bf16 subnormal
    const auto d = f.read<double>("a_bf16");
    CHECK(d == std::vector<double>{1.0, -2.0, std::numeric_limits<double>::infinity(),
                                   std::ldexp(1.0, -133)});
  }
  SECTION("F16, subnormals, inf, nan and -0 included") {
    const auto v = f.read<float>("m_f16");
    REQUIRE(v.size() == 10);
    CHECK(v[0] == 1.0f);
    CHECK(v[1] == std::ldexp(1.0f, -24));         // smallest subnormal
    CHECK(v[2] == 1023 * std::ldexp(1.0f, -24));  // largest subnormal
    CHECK(v[3] == 65504.0f);                      // largest normal
    CHECK(v[4] == std::numeric_limits<float>::infinity());
    CHECK(v[5] == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(v[6]));
    CHECK(bits(v[6]) == 0x7FC00000u);  // the quiet NaN, payload carried over
    CHECK(bits(v[7]) == 0x80000000u);  // -0
    CHECK(v[8] == -2.0f);
    CHECK(v[9] == 1365.0f / 4096.0f);  // 0x3555: (1024 + 0x155) * 2^(13 - 25)
    const auto d = f.read<double>("m_f16");
    for (std::size_t i = 0; i < v.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(v[i]))
        CHECK(std::isnan(d[i]));
      else
        CHECK(d[i] == double(v[i]));
    }
    CHECK(std::signbit(d[7]));
  }
  SECTION("F32 and F64, into float and double") {
    CHECK(f.read<float>("z_f32") ==
          std::vector<float>{1.5f, -0.0f, std::numeric_limits<float>::denorm_min()});
    CHECK(std::signbit(f.read<float>("z_f32")[1]));
    CHECK(f.read<double>("z_f32")[2] == double(std::numeric_limits<float>::denorm_min()));
    CHECK(f.read<double>("w_f64") == std::vector<double>{0.1, -1e300});
    const auto narrowed = f.read<float>("w_f64");  // F64 into float rounds to nearest
    CHECK(narrowed[0] == 0.1f);
    CHECK(narrowed[1] == -std::numeric_limits<float>::infinity());
  }
  SECTION("into a caller's buffer") {
    std::vector<double> buf(3, -7.0);
    f.read<double>("z_f32", buf.data(), buf.size());
    CHECK(buf[0] == 1.5);
  }
}

TEST_CASE("SafetensorsFile reads integer and BOOL tensors through read_int64", "[safetensors]") {
  const std::string p = tmp().path("ints.safetensors");
  const std::string data = raw_bytes<std::int64_t>({-5, std::int64_t{1} << 40}) +  // 0..16
                           raw_bytes<std::int32_t>({-1, 2147483647}) +             // 16..24
                           std::string("\x00\x01\x01", 3) +                        // 24..27
                           std::string("\xff\x80", 2) +                            // 27..29
                           raw_bytes<std::uint64_t>({7, ~std::uint64_t{0}}) +      // 29..45
                           raw_bytes<std::int16_t>({-300}) +                       // 45..47
                           raw_bytes<std::uint16_t>({65535}) +                     // 47..49
                           raw_bytes<std::uint32_t>({4000000000u}) +               // 49..53
                           raw_bytes<std::uint64_t>({9});                          // 53..61
  const std::string header =
      R"({"i64": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]},)"
      R"( "i32": {"dtype": "I32", "shape": [1, 2], "data_offsets": [16, 24]},)"
      R"( "mask": {"dtype": "BOOL", "shape": [3], "data_offsets": [24, 27]},)"
      R"( "i8": {"dtype": "I8", "shape": [1], "data_offsets": [27, 28]},)"
      R"( "u8": {"dtype": "U8", "shape": [1], "data_offsets": [28, 29]},)"
      R"( "u64": {"dtype": "U64", "shape": [2], "data_offsets": [29, 45]},)"
      R"( "i16": {"dtype": "I16", "shape": [], "data_offsets": [45, 47]},)"
      R"( "u16": {"dtype": "U16", "shape": [1], "data_offsets": [47, 49]},)"
      R"( "u32": {"dtype": "U32", "shape": [1], "data_offsets": [49, 53]},)"
      R"( "u64_ok": {"dtype": "U64", "shape": [1], "data_offsets": [53, 61]}})";
  write_bytes(p, st_file(header, data));
  const SafetensorsFile f(p);
  CHECK(f.read_int64("i64") == std::vector<std::int64_t>{-5, std::int64_t{1} << 40});
  CHECK(f.read_int64("i32") == std::vector<std::int64_t>{-1, 2147483647});
  CHECK(f.read_int64("mask") == std::vector<std::int64_t>{0, 1, 1});
  CHECK(f.read_int64("i8") == std::vector<std::int64_t>{-1});
  CHECK(f.read_int64("u8") == std::vector<std::int64_t>{128});
  CHECK(f.info("i16").shape.empty());
  CHECK(f.read_int64("i16") == std::vector<std::int64_t>{-300});
  CHECK(f.read_int64("u16") == std::vector<std::int64_t>{65535});
  CHECK(f.read_int64("u32") == std::vector<std::int64_t>{4000000000});
  CHECK(f.read_int64("u64_ok") == std::vector<std::int64_t>{9});
  REQUIRE_THROWS_WITH(f.read_int64("u64"), Contains(p) && Contains("tensor 'u64'") &&
                                               Contains("element 1 = 18446744073709551615") &&
                                               Contains("does not fit int64"));
  REQUIRE_THROWS_WITH(f.read<float>("i64"), Contains(p) && Contains("tensor 'i64' holds I64") &&
                                                Contains("use read_int64"));
}

TEST_CASE("SafetensorsFile refuses bad reads, naming the tensor", "[safetensors]") {
  const std::string p = tmp().path("reads.safetensors");
  write_bytes(p, st_file(R"({"x": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})",
                         raw_bytes<float>({1, 2, 3, 4})));
  const SafetensorsFile f(p);
  std::vector<float> buf(3);
  REQUIRE_THROWS_WITH(f.read<float>("x", buf.data(), buf.size()),
                      Contains(p) && Contains("tensor 'x': asked for 3 elements, it holds 4") &&
                          Contains("F32 shape [2, 2]"));
  REQUIRE_THROWS_WITH(f.read_int64("x"),
                      Contains("tensor 'x' holds F32") && Contains("read<float>"));
  REQUIRE_THROWS_WITH(f.info("y"), Contains(p) && Contains("no tensor 'y'") &&
                                       Contains("did you mean 'x'?") && Contains("1 tensors: x"));
  REQUIRE_THROWS_AS(f.read<double>("nope"), Error);
}

TEST_CASE("A missing tensor lists a few of the names there", "[safetensors]") {
  const std::string p = tmp().path("many.safetensors");
  std::vector<std::vector<float>> data(8, std::vector<float>{1.f});
  std::vector<SafetensorsTensor> ts;
  for (int i = 0; i < 8; ++i)
    ts.emplace_back("layers." + std::to_string(i) + ".weight", Shape{1}, data[i].data());
  write_safetensors(p, ts);
  const std::string m = error_of([&] { SafetensorsFile(p).info("layers.9.wieght"); });
  CHECK_THAT(m, Contains("no tensor 'layers.9.wieght'") && Contains("did you mean 'layers.") &&
                    Contains("(8 tensors: layers.0.weight, layers.1.weight") && Contains(", ...)"));
  CHECK_THAT(error_of([&] { SafetensorsFile(p).info("something else entirely"); }),
             !Contains("did you mean"));
}

TEST_CASE("SafetensorsFile is move-only and keeps its mapping across moves", "[safetensors]") {
  const std::string p = tmp().path("move.safetensors");
  const std::vector<double> x = {1.25, -3.5};
  write_safetensors(p, {SafetensorsTensor("x", Shape{2}, x.data())});
  static_assert(!std::is_copy_constructible_v<SafetensorsFile>);
  static_assert(std::is_nothrow_move_constructible_v<SafetensorsFile>);
  SafetensorsFile a(p);
  SafetensorsFile b(std::move(a));
  CHECK(b.read<double>("x") == x);
  SafetensorsFile c(p);
  c = std::move(b);
  CHECK(c.read<double>("x") == x);
  c = SafetensorsFile(p);  // the old mapping is released, the new one read
  CHECK(c.read<double>("x") == x);
}

TEST_CASE("write_safetensors writes the exact bytes of the format", "[safetensors]") {
  const std::string p = tmp().path("exact.safetensors");
  const std::vector<float> b = {1.0f, -2.0f};
  const double a = 3.0;
  // Given out of order: the header sorts the keys and the data follows the header's order.
  write_safetensors(
      p, {SafetensorsTensor("b", Shape{2}, b.data()), SafetensorsTensor("a", Shape{}, &a)});
  std::string header = R"({"a":{"data_offsets":[0,8],"dtype":"F64","shape":[]},)"
                       R"("b":{"data_offsets":[8,16],"dtype":"F32","shape":[2]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string expected =
      st_file(header, raw_bytes<double>({3.0}) + u16_bytes({0, 0x3F80}) + u16_bytes({0, 0xC000}));
  CHECK(read_bytes(p) == expected);
  CHECK_FALSE(std::filesystem::exists(p + ".tmp"));

  SECTION("metadata comes first, as __metadata__") {
    write_safetensors(p, {SafetensorsTensor("a", Shape{}, &a)}, {{"format", "pt"}});
    std::string h2 =
        R"({"__metadata__":{"format":"pt"},"a":{"data_offsets":[0,8],"dtype":"F64","shape":[]}})";
    h2.append((8 - h2.size() % 8) % 8, ' ');
    CHECK(read_bytes(p) == st_file(h2, raw_bytes<double>({3.0})));
  }
  SECTION("no tensors at all") {
    write_safetensors(p, {});
    CHECK(read_bytes(p) == st_file("{}      ", ""));
    CHECK(SafetensorsFile(p).names().empty());
  }
}

TEMPLATE_TEST_CASE("write_safetensors -> SafetensorsFile round trips bit for bit", "[safetensors]",
                   float, double) {
  using T = TestType;
  using L = std::numeric_limits<T>;
  const std::vector<Shape> shapes = {{}, {1}, {5}, {2, 3}, {2, 3, 4}, {0}, {3, 0, 2}, {1, 1, 1, 7}};
  std::vector<std::vector<T>> data;
  std::vector<SafetensorsTensor> ts;
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    std::vector<T> v(std::size_t(numel(shapes[s])));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = T(i * 0.37 - 1.5) / T(3);
    data.push_back(std::move(v));
  }
  data[4][0] = L::lowest();
  data[4][1] = L::max();
  data[4][2] = L::denorm_min();
  data[4][3] = -L::infinity();
  data[4][4] = L::quiet_NaN();
  data[4][5] = -T(0);
  for (std::size_t s = 0; s < shapes.size(); ++s)
    ts.emplace_back(tensor_name(s), shapes[s], data[s].data());
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "12"}};

  const std::string p = tmp().path("rt.safetensors");
  write_safetensors(p, ts, meta);
  REQUIRE_FALSE(std::filesystem::exists(p + ".tmp"));
  const SafetensorsFile f(p);
  CHECK(f.metadata() == meta);
  CHECK(f.names().size() == shapes.size());
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    const std::string name = tensor_name(s);
    CAPTURE(name);
    const TensorInfo& info = f.info(name);
    CHECK(info.dtype == (sizeof(T) == 4 ? SafetensorsDtype::F32 : SafetensorsDtype::F64));
    CHECK(info.shape == shapes[s]);
    const auto back = f.read<T>(name);
    REQUIRE(back.size() == data[s].size());
    for (std::size_t i = 0; i < back.size(); ++i) CHECK(bits(back[i]) == bits(data[s][i]));
  }

  // Layout: the data starts 8-byte aligned after a space-padded header whose tensors lie
  // back to back in key order.
  const std::string bytes = read_bytes(p);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK((8 + n) % 8 == 0);
  const std::string header = bytes.substr(8, n);
  const auto last = header.find_last_not_of(' ');
  CHECK(header[last] == '}');
  CHECK(n - last - 1 < 8);
  const auto j = nlohmann::json::parse(header);
  std::uint64_t offset = 0;
  for (const auto& [key, v] : j.items()) {
    if (key == "__metadata__") continue;
    CHECK(v["data_offsets"][0].template get<std::uint64_t>() == offset);
    offset = v["data_offsets"][1].template get<std::uint64_t>();
  }
  CHECK(8 + n + offset == bytes.size());
}

TEST_CASE("write_safetensors writes raw BF16 patterns and replaces a file", "[safetensors]") {
  const std::string p = tmp().path("bf16.safetensors");
  const std::vector<std::uint16_t> h = {0x3F80, 0xC000, 0x7F80};
  const std::vector<float> x = {4.f};
  write_safetensors(p, {SafetensorsTensor("h", SafetensorsDtype::BF16, Shape{3}, h.data())});
  write_safetensors(p, {SafetensorsTensor("h", SafetensorsDtype::BF16, Shape{3}, h.data()),
                        SafetensorsTensor("x", Shape{1}, x.data())});
  const SafetensorsFile f(p);
  CHECK(f.read<float>("h") ==
        std::vector<float>{1.f, -2.f, std::numeric_limits<float>::infinity()});
  CHECK(f.read<float>("x") == x);
}

TEST_CASE("write_safetensors refuses bad tensors and leaves no temporary", "[safetensors]") {
  const std::string p = tmp().path("wbad.safetensors");
  const std::vector<float> x = {1.f, 2.f};
  REQUIRE_THROWS_WITH(write_safetensors(p, {SafetensorsTensor("x", Shape{2}, x.data()),
                                            SafetensorsTensor("x", Shape{1}, x.data())}),
                      Contains(p) && Contains("tensor 'x' is given twice"));
  REQUIRE_THROWS_WITH(write_safetensors(p, {SafetensorsTensor("x", Shape{2, -1}, x.data())}),
                      Contains("tensor 'x': negative dimension in shape [2, -1]"));
  REQUIRE_THROWS_WITH(
      write_safetensors(p, {SafetensorsTensor("x", Shape{2}, static_cast<const float*>(nullptr))}),
      Contains("tensor 'x': no data for F32 shape [2]"));
  REQUIRE_THROWS_WITH(write_safetensors(p, {SafetensorsTensor("__metadata__", Shape{1}, x.data())}),
                      Contains("reserved"));
  REQUIRE_THROWS_WITH(write_safetensors(p, {SafetensorsTensor("bad\xff", Shape{1}, x.data())}),
                      Contains("not valid UTF-8"));
  CHECK_FALSE(std::filesystem::exists(p));
  const std::string nowhere = tmp().path("no/such/dir/x.safetensors");
  REQUIRE_THROWS_WITH(write_safetensors(nowhere, {SafetensorsTensor("x", Shape{2}, x.data())}),
                      Contains("cannot create '" + nowhere + ".tmp'"));
  // An existing directory where the file should go: written, then the rename fails.
  const std::string dir_in_the_way = tmp().subdir("in_the_way.safetensors");
  REQUIRE_THROWS_WITH(
      write_safetensors(dir_in_the_way, {SafetensorsTensor("x", Shape{2}, x.data())}),
      Contains("cannot rename"));
  CHECK_FALSE(std::filesystem::exists(dir_in_the_way + ".tmp"));
}

TEST_CASE("SafetensorsFile reports every malformed file with a precise gdn::Error",
          "[safetensors]") {
  const std::string p = tmp().path("bad.safetensors");
  const std::string good_h = R"({"x": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})";
  const std::string good_d = raw_bytes<float>({1, 2, 3, 4});
  auto entry = [](const std::string& dtype, const std::string& shape, const std::string& off) {
    return R"({"x": {"dtype": )" + dtype + R"(, "shape": )" + shape + R"(, "data_offsets": )" +
           off + "}}";
  };
  auto fails_with = [&](const std::string& file_bytes) {
    write_bytes(p, file_bytes);
    const std::string m = error_of([&] { SafetensorsFile f(p); });
    CHECK_THAT(m, Contains(p));
    return m;
  };

  SECTION("missing file, a directory") {
    CHECK_THAT(error_of([] { SafetensorsFile f(tmp().path("nope.safetensors")); }),
               Contains("cannot open safetensors file") && Contains("nope.safetensors") &&
                   Contains("No such file"));
    CHECK_THAT(error_of([] { SafetensorsFile f(tmp().dir.string()); }),
               Contains("not a regular file"));
  }
  SECTION("too short for the header length") {
    CHECK_THAT(fails_with(""), Contains("the file is 0 bytes, too short"));
    CHECK_THAT(fails_with(std::string("\x10\x00\x00", 3)),
               Contains("the file is 3 bytes, too short"));
  }
  SECTION("header length beyond the end of the file") {
    const std::string body = good_h + good_d;
    CHECK_THAT(fails_with(le64(99999999) + body),
               Contains("header length 99999999 beyond the end of the file (" +
                        std::to_string(8 + body.size()) + " bytes)"));
    CHECK_THAT(fails_with(le64(~std::uint64_t{0}) + body),
               Contains("header length 18446744073709551615 beyond the end"));
  }
  SECTION("truncated file: the header is whole, the data is not") {
    const std::string whole = st_file(good_h, good_d);
    CHECK_THAT(fails_with(whole.substr(0, whole.size() - 3)),
               Contains("tensor 'x': data_offsets [0, 16] beyond the end of the data section (13 "
                        "bytes"));
    CHECK_THAT(fails_with(whole.substr(0, 8 + good_h.size() - 5)),
               Contains("header length " + std::to_string(good_h.size()) + " beyond the end"));
  }
  SECTION("bad JSON") {
    CHECK_THAT(fails_with(st_file(R"({"x": {"dtype": "F32",)", good_d)),
               Contains("-byte header is not valid JSON"));
    CHECK_THAT(fails_with(st_file("", "")), Contains("0-byte header is not valid JSON"));
    CHECK_THAT(fails_with(st_file(good_h + " trailing", good_d)), Contains("not valid JSON"));
    CHECK_THAT(fails_with(st_file(R"({"x": 1e999})", "")), Contains("not valid JSON"));
  }
  SECTION("a header that is not an object of objects") {
    CHECK_THAT(fails_with(st_file("[1, 2]", "")), Contains("the header is [1,2], expected a JSON "
                                                           "object"));
    CHECK_THAT(fails_with(st_file(R"({"x": [0, 16]})", good_d)),
               Contains("tensor 'x': entry is [0,16], expected an object"));
    CHECK_THAT(fails_with(st_file(R"({"x": {"dtype": "F32", "shape": [4]}})", good_d)),
               Contains("tensor 'x': no 'data_offsets'"));
  }
  SECTION("bad __metadata__") {
    CHECK_THAT(fails_with(st_file(R"({"__metadata__": {"step": 5}})", "")),
               Contains("__metadata__ 'step' is 5, expected a string"));
    CHECK_THAT(fails_with(st_file(R"({"__metadata__": "pt"})", "")),
               Contains("__metadata__ is \"pt\", expected an object"));
  }
  SECTION("unsupported dtype") {
    CHECK_THAT(fails_with(st_file(entry(R"("F8_E4M3")", "[16]", "[0, 16]"), good_d)),
               Contains("tensor 'x': unsupported dtype 'F8_E4M3' (supported: BOOL") &&
                   Contains("BF16, F32, F64)"));
    CHECK_THAT(fails_with(st_file(entry(R"("f32")", "[4]", "[0, 16]"), good_d)),
               Contains("unsupported dtype 'f32'"));
    CHECK_THAT(fails_with(st_file(entry("4", "[4]", "[0, 16]"), good_d)),
               Contains("unsupported dtype 4"));
  }
  SECTION("bad shapes") {
    CHECK_THAT(fails_with(st_file(entry(R"("F32")", "[2, -2]", "[0, 16]"), good_d)),
               Contains("tensor 'x': shape [2,-2]: dimension -2 is not a non-negative integer"));
    CHECK_THAT(fails_with(st_file(entry(R"("F32")", "[2.5]", "[0, 16]"), good_d)),
               Contains("dimension 2.5 is not"));
    CHECK_THAT(fails_with(st_file(entry(R"("F32")", "4", "[0, 16]"), good_d)),
               Contains("shape 4 is not a list"));
    CHECK_THAT(
        fails_with(st_file(entry(R"("F32")", "[4294967296, 4294967296]", "[0, 16]"), good_d)),
        Contains("shape [4294967296, 4294967296] is too large"));
  }
  SECTION("bad data_offsets") {
    CHECK_THAT(fails_with(st_file(entry(R"("F32")", "[2, 2]", "[0, 999]"), good_d)),
               Contains("tensor 'x': data_offsets [0, 999] beyond the end of the data section (16 "
                        "bytes"));
    CHECK_THAT(fails_with(st_file(entry(R"("F32")", "[2, 2]", "[16, 0]"), good_d)),
               Contains("data_offsets [16, 0] end before they begin"));
    CHECK_THAT(fails_with(st_file(entry(R"("F32")", "[2, 2]", "[0]"), good_d)),
               Contains("data_offsets [0], expected [begin, end]"));
    CHECK_THAT(fails_with(st_file(entry(R"("F32")", "[2, 2]", "[-4, 16]"), good_d)),
               Contains("data_offsets [-4,16], expected"));
  }
  SECTION("a byte count that does not match dtype and shape") {
    write_bytes(p, st_file(entry(R"("F32")", "[2, 2]", "[0, 12]"), good_d));
    CHECK_THAT(error_of([&] { SafetensorsFile f(p); }),
               Contains(p + ": tensor 'x': data_offsets [0, 12] hold 12 bytes, expected 16 for "
                            "F32 shape [2, 2]"));
    CHECK_THAT(fails_with(st_file(entry(R"("BF16")", "[]", "[0, 4]"), good_d)),
               Contains("hold 4 bytes, expected 2 for BF16 shape []"));
    CHECK_THAT(fails_with(st_file(entry(R"("F64")", "[3, 0]", "[0, 8]"), good_d)),
               Contains("hold 8 bytes, expected 0 for F64 shape [3, 0]"));
  }
  // The safetensors library's rule: each name once, and the tensors in offset order tile
  // the data section (every byte owned by exactly one tensor).
  auto two = [](const std::string& a_off, const std::string& b_off) {
    return R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": )" + a_off +
           R"(}, "b": {"dtype": "F32", "shape": [2], "data_offsets": )" + b_off + "}}";
  };
  SECTION("a name given twice") {
    const std::string h = R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, )"
                          R"("y": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}, )"
                          R"("x": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})";
    CHECK_THAT(fails_with(st_file(h, good_d)),
               Contains("the header gives 'x' twice (entry 1: data_offsets [0,8]; entry 3: "
                        "data_offsets [8,16])"));
    CHECK_THAT(fails_with(st_file(R"({"__metadata__": {}, "__metadata__": {"a": "b"}})", "")),
               Contains("gives '__metadata__' twice"));
  }
  SECTION("overlapping tensors") {
    CHECK_THAT(fails_with(st_file(two("[0, 8]", "[4, 12]"), good_d.substr(0, 12))),
               Contains("tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a' (data_offsets "
                        "[0, 8])"));
    // Two names on the same bytes (tied weights) are refused too, as the library does.
    CHECK_THAT(fails_with(st_file(two("[0, 8]", "[0, 8]"), good_d.substr(0, 8))),
               Contains("tensor 'b' (data_offsets [0, 8]) overlaps tensor 'a'"));
  }
  SECTION("bytes that belong to no tensor") {
    CHECK_THAT(fails_with(st_file(two("[0, 8]", "[12, 20]"), good_d + "tail")),
               Contains("bytes [8, 12) of the data section belong to no tensor: a gap between "
                        "tensor 'a' (data_offsets [0, 8]) and tensor 'b' (data_offsets [12, 20])"));
    CHECK_THAT(fails_with(st_file(two("[4, 12]", "[12, 20]"), good_d + "tail")),
               Contains("bytes [0, 4) of the data section belong to no tensor: a gap before the "
                        "first, tensor 'a' (data_offsets [4, 12])"));
    CHECK_THAT(fails_with(st_file(good_h, good_d + "x")),
               Contains("the 17-byte data section has 1 bytes after the last tensor, tensor 'x' "
                        "(data_offsets [0, 16]) that belong to no tensor"));
    CHECK_THAT(fails_with(st_file("{}", "junk")),
               Contains("has 4 bytes after the header, which lists no tensor"));
  }
  SECTION("any order in the header, and empty tensors, tile") {
    const std::string h = R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}, )"
                          R"("e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}, )"
                          R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, )"
                          R"("z": {"dtype": "F32", "shape": [0, 3], "data_offsets": [16, 16]}})";
    write_bytes(p, st_file(h, good_d));
    const SafetensorsFile f(p);
    CHECK(f.names() == std::vector<std::string>{"a", "b", "e", "z"});
    CHECK(f.read<float>("a") == std::vector<float>{1, 2});
    CHECK(f.read<float>("b") == std::vector<float>{3, 4});
  }
}

TEST_CASE("SafetensorsDir reads a sharded checkpoint by tensor name", "[safetensors]") {
  const std::string dir = tmp().subdir("sharded");
  const std::vector<float> a = {1.f, 2.f, 3.f};
  const std::vector<double> b = {0.5};
  const std::vector<std::uint16_t> c = {0x3C00, 0x0001};
  write_safetensors(dir + "/model-00001-of-00002.safetensors",
                    {SafetensorsTensor("embed.weight", Shape{3}, a.data()),
                     SafetensorsTensor("norm.weight", Shape{1}, b.data())});
  write_safetensors(
      dir + "/model-00002-of-00002.safetensors",
      {SafetensorsTensor("lm_head.weight", SafetensorsDtype::F16, Shape{1, 2}, c.data())});
  write_bytes(dir + "/model.safetensors.index.json",
              R"({"metadata": {"total_size": 24, "note": "two shards"}, "weight_map": {)"
              R"("norm.weight": "model-00001-of-00002.safetensors",)"
              R"("lm_head.weight": "model-00002-of-00002.safetensors",)"
              R"("embed.weight": "model-00001-of-00002.safetensors"}})");

  SafetensorsDir d(dir);
  CHECK(d.dir() == dir);
  CHECK(d.names() == std::vector<std::string>{"embed.weight", "lm_head.weight", "norm.weight"});
  CHECK(d.has("norm.weight"));
  CHECK_FALSE(d.has("model-00001-of-00002.safetensors"));
  CHECK(d.metadata() ==
        std::map<std::string, std::string>{{"note", "two shards"}, {"total_size", "24"}});
  CHECK(d.info("lm_head.weight").dtype == SafetensorsDtype::F16);
  CHECK(d.info("lm_head.weight").shape == Shape{1, 2});
  CHECK(d.read<float>("embed.weight") == a);
  CHECK(d.read<double>("norm.weight") == b);
  CHECK(d.read<double>("lm_head.weight") == std::vector<double>{1.0, std::ldexp(1.0, -24)});
  std::vector<float> buf(1);
  d.read<float>("norm.weight", buf.data(), 1);
  CHECK(buf[0] == 0.5f);
  // Each shard is opened once: tensors of one shard come from one object.
  CHECK(&d.file_of("embed.weight") == &d.file_of("norm.weight"));
  CHECK(&d.file_of("embed.weight") != &d.file_of("lm_head.weight"));
  CHECK(d.file_of("lm_head.weight").path() == dir + "/model-00002-of-00002.safetensors");
  REQUIRE_THROWS_WITH(d.info("norm.wieght"),
                      Contains(dir + "/model.safetensors.index.json: no tensor 'norm.wieght'") &&
                          Contains("did you mean 'norm.weight'?"));

  SafetensorsDir moved(std::move(d));
  CHECK(moved.read<float>("embed.weight") == a);
}

TEST_CASE("SafetensorsDir reports a file it cannot follow with the OS's reason", "[safetensors]") {
  const std::string dir = tmp().subdir("loop");
  std::filesystem::create_symlink("model.safetensors", dir + "/model.safetensors");
  CHECK_THAT(error_of([&] { SafetensorsDir d(dir); }),
             Contains("cannot open '" + dir +
                      "/model.safetensors': Too many levels of symbolic "
                      "links"));
  const std::string sharded = tmp().subdir("loop_shard");
  const std::vector<float> a = {1.f};
  write_safetensors(sharded + "/one.safetensors", {SafetensorsTensor("a", Shape{1}, a.data())});
  std::filesystem::create_symlink("two.safetensors", sharded + "/two.safetensors");
  write_bytes(sharded + "/model.safetensors.index.json",
              R"({"weight_map": {"a": "one.safetensors", "b": "two.safetensors"}})");
  const SafetensorsDir d(sharded);
  CHECK(d.read<float>("a") == a);
  CHECK_THAT(error_of([&] { d.info("b"); }),
             Contains("tensor 'b' is in shard 'two.safetensors', which cannot be opened (" +
                      sharded + "/two.safetensors): Too many levels of symbolic links"));
}

TEST_CASE("SafetensorsDir prefers model.safetensors and reads its metadata", "[safetensors]") {
  const std::string dir = tmp().subdir("single");
  const std::vector<float> a = {7.f};
  write_safetensors(dir + "/model.safetensors", {SafetensorsTensor("w", Shape{1}, a.data())},
                    {{"format", "pt"}});
  write_bytes(dir + "/model.safetensors.index.json", "not even JSON");
  const SafetensorsDir d(dir);
  CHECK(d.names() == std::vector<std::string>{"w"});
  CHECK(d.metadata().at("format") == "pt");
  CHECK(d.read<float>("w") == a);
  REQUIRE_THROWS_WITH(d.info("v"), Contains(dir + "/model.safetensors: no tensor 'v'"));
}

TEST_CASE("SafetensorsDir reports bad directories, indexes and shards", "[safetensors]") {
  const std::vector<float> a = {1.f};
  SECTION("no directory, or nothing in it") {
    CHECK_THAT(error_of([] { SafetensorsDir d(tmp().path("absent")); }),
               Contains("absent' does not exist or is not a directory"));
    const std::string empty = tmp().subdir("empty");
    CHECK_THAT(error_of([&] { SafetensorsDir d(empty); }),
               Contains(empty) &&
                   Contains("holds neither model.safetensors nor model.safetensors.index.json"));
  }
  SECTION("a corrupt model.safetensors names the file") {
    const std::string dir = tmp().subdir("corrupt");
    write_bytes(dir + "/model.safetensors", le64(1000) + "{}");
    CHECK_THAT(error_of([&] { SafetensorsDir d(dir); }),
               Contains(dir + "/model.safetensors: header length 1000 beyond the end"));
  }
  const std::string dir = tmp().subdir("badindex");
  const std::string index = dir + "/model.safetensors.index.json";
  SECTION("bad index JSON and structure") {
    write_bytes(index, R"({"weight_map": {"a": )");
    CHECK_THAT(error_of([&] { SafetensorsDir d(dir); }), Contains(index + ": not valid JSON"));
    write_bytes(index, R"({"metadata": {}})");
    CHECK_THAT(error_of([&] { SafetensorsDir d(dir); }),
               Contains(index + ": expected an object with a \"weight_map\""));
    write_bytes(index, R"({"weight_map": {"a": 3}})");
    CHECK_THAT(error_of([&] { SafetensorsDir d(dir); }),
               Contains("weight_map['a'] is 3, expected the file name of a shard"));
    write_bytes(index, R"({"weight_map": {"a": "../elsewhere/model.safetensors"}})");
    CHECK_THAT(error_of([&] { SafetensorsDir d(dir); }), Contains("weight_map['a'] is"));
    write_bytes(index, R"({"metadata": [1], "weight_map": {}})");
    CHECK_THAT(error_of([&] { SafetensorsDir d(dir); }), Contains("\"metadata\" is [1]"));
  }
  SECTION("a missing shard names the shard and the tensor") {
    write_safetensors(dir + "/model-00001-of-00002.safetensors",
                      {SafetensorsTensor("a", Shape{1}, a.data())});
    write_bytes(index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors",)"
                       R"( "b": "model-00002-of-00002.safetensors"}})");
    const SafetensorsDir d(dir);  // shards open when first needed
    CHECK(d.read<float>("a") == a);
    CHECK_THAT(error_of([&] { d.read<float>("b"); }),
               Contains(index + ": tensor 'b' is in shard 'model-00002-of-00002.safetensors', "
                                "which does not exist"));
    CHECK(d.has("b"));
  }
  SECTION("a shard without the tensor the index puts there, and a corrupt shard") {
    write_safetensors(dir + "/s1.safetensors", {SafetensorsTensor("a", Shape{1}, a.data())});
    write_bytes(dir + "/s2.safetensors", le64(3) + "{x}");
    write_bytes(index, R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors",)"
                       R"( "c": "s2.safetensors"}})");
    const SafetensorsDir d(dir);
    CHECK_THAT(error_of([&] { d.info("b"); }),
               Contains(index + ": tensor 'b' is mapped to shard 's1.safetensors', which has no "
                                "such tensor"));
    CHECK_THAT(
        error_of([&] { d.info("c"); }),
        Contains(index + ": tensor 'c' is in shard 's2.safetensors', which cannot be read") &&
            Contains(dir + "/s2.safetensors: the 3-byte header is not valid JSON"));
  }
}
