// Tests src/train/checkpoint, checkpoint_set and checkpoint_rotation: round trips, dtype
// conversion, parts read at another layout (and only the parts needed), torn, corrupt and
// non-finite files, the rotation, and the directory check.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/single_communicator.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "model/params.h"
#include "test_support.h"
#include "train/checkpoint.h"
#include "train/checkpoint_rotation.h"
#include "train/checkpoint_set.h"

using namespace gdn;
using Catch::Contains;
using gdn::test::bit_difference;
namespace fs = std::filesystem;

namespace {

std::vector<ParamInfo> make_model(Shape embed_shape = {3, 4}) {
  ParamStore<float, Host> ps;  // only the table of names, shapes and offsets is used
  ps.add("embed", std::move(embed_shape), true);
  ps.add("layers.0.norm", {4}, false);
  return ps.infos();
}

std::size_t elements(const std::vector<ParamInfo>& params) {
  return std::size_t(params.back().offset + params.back().size);
}

// Seeded values and non-zero moments.
template <typename T>
CheckpointData<T> some_state(const std::vector<ParamInfo>& params, std::uint64_t seed) {
  Rng rng(seed);
  const std::size_t n = elements(params);
  CheckpointData<T> d{std::vector<T>(n), std::vector<T>(n), std::vector<T>(n)};
  for (std::vector<T>* x : {&d.values, &d.m, &d.v})
    for (T& e : *x) e = T(rng.normal());
  for (T& e : d.v) e = e * e;
  return d;
}

std::vector<std::string> dir_listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A checkpoint file as the format describes it ("GDNCKPT1", u64 header length, JSON
// header, data, u64 FNV-1a-64 of everything before it, "GDNCKEND"), written here
// independently of the code under test, to make files it must refuse.
struct Container {
  nlohmann::json header;
  std::vector<char> data;
};

Container read_container(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t hlen = 0;
  std::memcpy(&hlen, b.data() + 8, 8);
  return {nlohmann::json::parse(b.begin() + 16, b.begin() + 16 + std::ptrdiff_t(hlen)),
          std::vector<char>(b.begin() + 16 + std::ptrdiff_t(hlen), b.end() - 16)};
}

// Writes c to path; returns {bytes, checksum}.
std::pair<std::uint64_t, std::uint64_t> write_container(const std::string& path,
                                                        const Container& c) {
  const std::string h = c.header.dump();
  std::vector<char> b(8 + 8);
  std::memcpy(b.data(), "GDNCKPT1", 8);
  const std::uint64_t hlen = h.size();
  std::memcpy(b.data() + 8, &hlen, 8);
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), c.data.begin(), c.data.end());
  std::uint64_t fnv = 0xcbf29ce484222325ull;
  for (char ch : b) fnv = (fnv ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  b.resize(b.size() + 16);
  std::memcpy(b.data() + b.size() - 16, &fnv, 8);
  std::memcpy(b.data() + b.size() - 8, "GDNCKEND", 8);
  std::ofstream(path, std::ios::binary).write(b.data(), std::streamsize(b.size()));
  return {b.size(), fnv};
}

}  // namespace

TEMPLATE_TEST_CASE("checkpoint round trip is bit-exact", "[checkpoint]", float, double) {
  const test::TempDir tmp("gdn_test_checkpoint");
  const std::string dir = tmp / "ckpt";  // created by the save
  const std::vector<ParamInfo> params = make_model();
  const CheckpointData<TestType> d = some_state<TestType>(params, 11);
  TrainingState st;
  st.step = 3;
  st.config_json = R"({"train": {"seed": 1}})";
  save_checkpoint(dir, st, params, d);
  // The manifest and one part; no .tmp left.
  CHECK(dir_listing(dir) ==
        std::vector<std::string>{"ckpt-00000003.bin", "ckpt-00000003.bin.part-00000"});
  REQUIRE(latest_checkpoint(dir) == (fs::path(dir) / "ckpt-00000003.bin").string());

  CheckpointData<TestType> got;
  const TrainingState s = load_checkpoint(*latest_checkpoint(dir), params, got);
  CHECK(s.step == 3);
  CHECK(s.config_json == st.config_json);
  CHECK(bit_difference(got.values, d.values) == "");
  CHECK(bit_difference(got.m, d.m) == "");
  CHECK(bit_difference(got.v, d.v) == "");
}

TEST_CASE("an f32 checkpoint loads into f64 parameters and back", "[checkpoint]") {
  const test::TempDir tmp("gdn_test_checkpoint");
  const std::vector<ParamInfo> params = make_model();
  const CheckpointData<float> f = some_state<float>(params, 5);
  save_checkpoint(tmp.dir.string(), TrainingState{7, "{}"}, params, f);
  CheckpointData<double> d;
  CHECK(load_checkpoint(tmp / "ckpt-00000007.bin", params, d).step == 7);
  for (std::size_t e = 0; e < elements(params); ++e) {
    CHECK(d.values[e] == double(f.values[e]));
    CHECK(d.m[e] == double(f.m[e]));
    CHECK(d.v[e] == double(f.v[e]));
  }
  // And f64 into f32: values round to the nearest float.
  save_checkpoint(tmp.dir.string(), TrainingState{8, "{}"}, params, d);
  CheckpointData<float> f2;
  load_checkpoint(tmp / "ckpt-00000008.bin", params, f2);
  CHECK(bit_difference(f.values, f2.values) == "");
}

TEST_CASE("latest_checkpoint skips torn and corrupt files", "[checkpoint]") {
  const test::TempDir tmp("gdn_test_checkpoint");
  const std::string dir = tmp.dir.string();
  CHECK_FALSE(latest_checkpoint(dir).has_value());
  CHECK_FALSE(latest_checkpoint(tmp / "missing").has_value());

  const std::vector<ParamInfo> params = make_model();
  const CheckpointData<float> d = some_state<float>(params, 3);
  for (std::int64_t step : {3, 5, 7}) save_checkpoint(dir, TrainingState{step, "{}"}, params, d);
  CHECK(latest_checkpoint(dir) == tmp / "ckpt-00000007.bin");

  // Step 7: one flipped byte in the tensor data.
  const std::string p7 = tmp / "ckpt-00000007.bin";
  {
    std::fstream f(p7, std::ios::in | std::ios::out | std::ios::binary);
    const auto pos = std::streamoff(fs::file_size(p7) / 2);
    f.seekg(pos);
    char ch = 0;
    f.read(&ch, 1);
    ch = char(ch ^ 0x10);
    f.seekp(pos);
    f.write(&ch, 1);
  }
  // Step 5: torn (truncated) as if the writer died mid-file.
  const std::string p5 = tmp / "ckpt-00000005.bin";
  fs::resize_file(p5, fs::file_size(p5) - 20);
  CHECK(latest_checkpoint(dir) == tmp / "ckpt-00000003.bin");

  CheckpointData<float> got;
  CHECK_THROWS_WITH(load_checkpoint(p7, params, got), Contains(p7) && Contains("checksum"));
  CHECK_THROWS_WITH(load_checkpoint(p5, params, got), Contains(p5) && Contains("truncated"));

  // Step 3's part torn: the set is incomplete, and the scan says which part.
  const std::string part3 = tmp / "ckpt-00000003.bin.part-00000";
  fs::resize_file(part3, fs::file_size(part3) - 1);
  CHECK_FALSE(latest_checkpoint(dir).has_value());
  const std::vector<CheckpointFile> files = scan_checkpoints(dir);
  REQUIRE(files.size() == 3);
  CHECK_THAT(files[2].problem, Contains(part3) && Contains("bytes"));
  CHECK_THROWS_WITH(load_checkpoint(tmp / "ckpt-00000003.bin", params, got), Contains(part3));
  // A part of the right size but other bytes (a later save that died before its
  // manifest): the scan cannot tell, the load refuses it.
  save_checkpoint(dir, TrainingState{3, "{}"}, params, d);
  CheckpointData<float> other = some_state<float>(params, 4);
  const CheckpointPart p =
      write_checkpoint_part(tmp / "x", 3, 0, params, {{0, 0, std::int64_t(elements(params))}},
                            other.values.data(), other.m.data(), other.v.data());
  fs::copy_file(tmp.dir / "x" / p.file, part3, fs::copy_options::overwrite_existing);
  CHECK(latest_checkpoint(dir) == tmp / "ckpt-00000003.bin");
  CHECK_THROWS_WITH(load_checkpoint(tmp / "ckpt-00000003.bin", params, got),
                    Contains(part3) && Contains("another save"));
}

TEST_CASE("a checkpoint in parts loads at another layout, reading only the parts it needs",
          "[checkpoint]") {
  const test::TempDir tmp("gdn_test_checkpoint");
  const std::string dir = tmp.dir.string();
  const std::vector<ParamInfo> params = make_model();  // 16 elements
  const CheckpointData<double> d = some_state<double>(params, 21);
  // Three ranks' parts of uneven runs (rank 1 holds two), each from its own arrays.
  const std::vector<std::vector<GlobalRun>> runs = {
      {{0, 0, 5}}, {{5, 0, 2}, {12, 2, 3}}, {{7, 0, 5}, {15, 5, 1}}};
  std::vector<CheckpointPart> parts;
  for (int r = 0; r < 3; ++r) {
    std::vector<double> x[3];
    for (const GlobalRun& g : runs[std::size_t(r)])
      for (int k = 0; k < 3; ++k) {
        const std::vector<double>& src = k == 0 ? d.values : k == 1 ? d.m : d.v;
        x[k].insert(x[k].end(), src.begin() + g.global, src.begin() + g.global + g.n);
      }
    parts.push_back(write_checkpoint_part(dir, 4, r, params, runs[std::size_t(r)], x[0].data(),
                                          x[1].data(), x[2].data()));
  }
  // Without the manifest the set does not exist.
  CHECK_FALSE(latest_checkpoint(dir).has_value());
  write_checkpoint_manifest(dir, TrainingState{4, "{}"}, DType::f64, params, parts);
  const std::string path = tmp / "ckpt-00000004.bin";
  REQUIRE(latest_checkpoint(dir) == path);

  // Another layout: elements [3, 9) and [14, 16) into one array, at 1 and 10.
  const std::vector<GlobalRun> want = {{3, 1, 6}, {14, 10, 2}};
  std::vector<double> got[3];
  for (auto& g : got) g.assign(12, -1.0);
  load_checkpoint(path, params, want, got[0].data(), got[1].data(), got[2].data());
  for (int k = 0; k < 3; ++k) {
    const std::vector<double>& src = k == 0 ? d.values : k == 1 ? d.m : d.v;
    std::vector<double> expect(12, -1.0);
    std::copy_n(src.begin() + 3, 6, expect.begin() + 1);
    std::copy_n(src.begin() + 14, 2, expect.begin() + 10);
    CHECK(bit_difference(got[k], expect) == "");
  }
  // Rank 0's part is not needed for [5, 7): it may be gone. It is needed for [4, 6).
  fs::remove(tmp / "ckpt-00000004.bin.part-00000");
  std::vector<double> a(2), b(2), c(2);
  load_checkpoint(path, params, {{5, 0, 2}}, a.data(), b.data(), c.data());
  CHECK((a[0] == d.values[5] && b[1] == d.m[6] && c[0] == d.v[5]));
  CHECK_THROWS_WITH(load_checkpoint(path, params, {{4, 0, 2}}, a.data(), b.data(), c.data()),
                    Contains("part-00000") && Contains("missing"));
  CHECK(a[0] == d.values[5]);  // unchanged

  // Parts that leave a gap or overlap are refused before any manifest is written.
  std::vector<CheckpointPart> gap = {parts[0], parts[2]};
  CHECK_THROWS_WITH(write_checkpoint_manifest(dir, TrainingState{5, "{}"}, DType::f64, params, gap),
                    Contains("leave out element 5"));
  std::vector<CheckpointPart> twice = {parts[0], parts[1], parts[2], parts[1]};
  CHECK_THROWS_WITH(
      write_checkpoint_manifest(dir, TrainingState{5, "{}"}, DType::f64, params, twice),
      Contains("twice"));
  CHECK_FALSE(fs::exists(tmp / "ckpt-00000005.bin"));
}

TEST_CASE("a non-finite value is never written, and a file holding one is never loaded",
          "[checkpoint]") {
  const test::TempDir tmp("gdn_test_checkpoint");
  const std::string dir = tmp.dir.string();
  const std::vector<ParamInfo> params = make_model();
  CheckpointData<double> d = some_state<double>(params, 4);
  save_checkpoint(dir, TrainingState{1, "{}"}, params, d);
  d.m[13] = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(save_checkpoint(dir, TrainingState{2, "{}"}, params, d),
                    Contains("step 2") && Contains("AdamW moment of 'layers.0.norm'"));
  CHECK(dir_listing(dir) ==
        std::vector<std::string>{"ckpt-00000001.bin", "ckpt-00000001.bin.part-00000"});
  // Step 9: step 1 with a NaN in its part, otherwise complete (checksums match, as if an
  // older gdn-cp had written it): the scan cannot see it, the load refuses it, and a
  // resume passes over it to step 1.
  Container part = read_container(tmp / "ckpt-00000001.bin.part-00000");
  const double nan = std::nan("");
  std::memcpy(part.data.data(), &nan, 8);  // the first value of 'embed'
  part.header["step"] = 9;
  const std::string part9 = tmp / "ckpt-00000009.bin.part-00000";
  const auto [bytes, checksum] = write_container(part9, part);
  Container man = read_container(tmp / "ckpt-00000001.bin");
  man.header["step"] = 9;
  man.header["parts"][0]["file"] = "ckpt-00000009.bin.part-00000";
  man.header["parts"][0]["bytes"] = bytes;
  man.header["parts"][0]["checksum"] = checksum;
  const std::string p1 = tmp / "ckpt-00000001.bin", p9 = tmp / "ckpt-00000009.bin";
  write_container(p9, man);
  CHECK(latest_checkpoint(dir) == p9);
  CheckpointData<double> got;
  CHECK_THROWS_WITH(load_checkpoint(p9, params, got), Contains(part9) && Contains("non-finite"));

  SingleCommunicator world;
  const std::int64_t n = std::int64_t(elements(params));
  std::vector<double> x[3];
  for (auto& e : x) e.assign(std::size_t(n), 0.0);
  std::vector<std::string> seen;
  const std::optional<LoadedCheckpoint> loaded = load_newest_checkpoint<double>(
      world, dir, params, {{0, 0, n}}, x[0].data(), x[1].data(), x[2].data(),
      [&](const CheckpointFile& f) { seen.push_back(f.path); });
  REQUIRE(loaded.has_value());
  CHECK(loaded->path == p1);
  CHECK(loaded->state.step == 1);
  CHECK(seen == std::vector<std::string>{p9, p1});
  CHECK(x[0][0] == d.values[0]);
}

TEST_CASE("the checkpoint rotation keeps the newest N of this run's, and only those",
          "[checkpoint]") {
  const test::TempDir tmp("gdn_test_checkpoint");
  const std::string dir = tmp.dir.string();
  const std::vector<ParamInfo> params = make_model();
  const CheckpointData<float> d = some_state<float>(params, 8);
  for (std::int64_t step : {1, 2, 3, 10, 4})
    save_checkpoint(dir, TrainingState{step, "{}"}, params, d);
  std::ofstream(tmp / "ckpt-00000099.bin") << "random bytes named like the newest checkpoint";
  // Step 3's is another run's: the rotation never counts or deletes it.
  const auto ours = [](const TrainingState& s) {
    return s.step == 3 ? std::string("was written by another run") : std::string();
  };
  CheckpointRotation keep_all(dir, 0, scan_checkpoints(dir), ours);
  CHECK(keep_all.saved(4).empty());  // 0 keeps all
  CheckpointRotation rotation(dir, 2, scan_checkpoints(dir), ours);
  REQUIRE(rotation.foreign().size() == 2);
  CHECK(rotation.foreign()[0].first == tmp / "ckpt-00000099.bin");
  CHECK_THAT(rotation.foreign()[1].second,
             Contains(tmp / "ckpt-00000003.bin") && Contains("another run"));
  save_checkpoint(dir, TrainingState{11, "{}"}, params, d);
  CHECK(rotation.saved(11).size() == 3);  // 1, 2 and 4
  // Their parts went with them.
  CHECK(dir_listing(dir) ==
        std::vector<std::string>{"ckpt-00000003.bin", "ckpt-00000003.bin.part-00000",
                                 "ckpt-00000010.bin", "ckpt-00000010.bin.part-00000",
                                 "ckpt-00000011.bin", "ckpt-00000011.bin.part-00000",
                                 "ckpt-00000099.bin"});
}

TEST_CASE("check_checkpoint_dir gives the OS's reason at start-up", "[checkpoint]") {
  const test::TempDir tmp("gdn_test_checkpoint");
  CHECK_NOTHROW(check_checkpoint_dir(tmp / "new/nested"));
  CHECK(fs::is_directory(tmp / "new/nested"));
  CHECK(dir_listing(tmp / "new/nested").empty());  // the probe is gone
  const std::string file = tmp / "a_file";
  std::ofstream(file) << "x";
  CHECK_THROWS_WITH(check_checkpoint_dir(file), Contains(file) && Contains("Not a directory"));
  CHECK_THROWS_WITH(check_checkpoint_dir(file + "/sub"), Contains(file + "/sub"));
}

TEST_CASE("loading into a model of another shape names the parameter", "[checkpoint]") {
  const test::TempDir tmp("gdn_test_checkpoint");
  const std::vector<ParamInfo> params = make_model();
  save_checkpoint(tmp.dir.string(), TrainingState{1, "{}"}, params, some_state<double>(params, 9));
  const std::string path = tmp / "ckpt-00000001.bin";

  CheckpointData<double> got;
  CHECK_THROWS_WITH(
      load_checkpoint(path, make_model({3, 5}), got),
      Contains(path) && Contains("parameter 'embed'") && Contains("[3, 4]") && Contains("[3, 5]"));
  CHECK(got.values.empty());  // nothing was written

  ParamStore<double, Host> renamed;
  renamed.add("embedding", {3, 4}, true);
  renamed.add("layers.0.norm", {4}, false);
  CHECK_THROWS_WITH(load_checkpoint(path, renamed.infos(), got),
                    Contains("'embed'") && Contains("'embedding'"));

  ParamStore<double, Host> more;
  more.add("embed", {3, 4}, true);
  more.add("layers.0.norm", {4}, false);
  more.add("lm_head", {4, 3}, true);
  CHECK_THROWS_WITH(load_checkpoint(path, more.infos(), got), Contains("lm_head"));
}
