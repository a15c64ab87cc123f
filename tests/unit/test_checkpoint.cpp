// Tests src/train/checkpoint and checkpoint_rotation: round trips, dtype conversion, torn,
// corrupt and non-finite files, the rotation, and the directory check.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "model/params.h"
#include "test_support.h"
#include "train/checkpoint.h"
#include "train/checkpoint_rotation.h"

using namespace gdn;
using Catch::Contains;
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

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

std::vector<std::string> dir_listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
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
  CHECK(dir_listing(dir) == std::vector<std::string>{"ckpt-00000003.bin"});  // no .tmp left
  REQUIRE(latest_checkpoint(dir) == (fs::path(dir) / "ckpt-00000003.bin").string());

  CheckpointData<TestType> got;
  const TrainingState s = load_checkpoint(*latest_checkpoint(dir), params, got);
  CHECK(s.step == 3);
  CHECK(s.config_json == st.config_json);
  CHECK(same_bits(got.values, d.values));
  CHECK(same_bits(got.m, d.m));
  CHECK(same_bits(got.v, d.v));
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
  CHECK(same_bits(f.values, f2.values));
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
  CHECK(dir_listing(dir) == std::vector<std::string>{"ckpt-00000001.bin"});
  // A file with a NaN that is otherwise complete (its checksum matches, as if an older
  // gdn-cp had written it): latest_checkpoint passes over it, load_checkpoint refuses it.
  const std::string p1 = tmp / "ckpt-00000001.bin", p9 = tmp / "ckpt-00000009.bin";
  std::vector<char> bytes;
  {
    std::ifstream in(p1, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::uint64_t hlen = [&] {
    std::uint64_t x;
    std::memcpy(&x, bytes.data() + 8, 8);
    return x;
  }();
  const double nan = std::nan("");
  std::memcpy(bytes.data() + 16 + hlen, &nan, 8);  // the first value of 'embed'
  std::uint64_t h = 0xcbf29ce484222325ull;         // FNV-1a-64 of everything before it
  for (std::size_t i = 0; i + 16 < bytes.size(); ++i)
    h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  std::memcpy(bytes.data() + bytes.size() - 16, &h, 8);
  std::ofstream(p9, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  CHECK(latest_checkpoint(dir) == p1);
  CheckpointData<double> got;
  CHECK_THROWS_WITH(load_checkpoint(p9, params, got), Contains(p9) && Contains("non-finite"));
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
  CHECK(dir_listing(dir) == std::vector<std::string>{"ckpt-00000003.bin", "ckpt-00000010.bin",
                                                     "ckpt-00000011.bin", "ckpt-00000099.bin"});
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
