// Tests src/train/step_log: truncate_step_log on resume.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "test_support.h"
#include "train/step_log.h"

using namespace gdn;
namespace fs = std::filesystem;

TEST_CASE("truncate_step_log keeps the steps before the checkpoint, once", "[train]") {
  const test::TempDir tmp("gdn_test_step_log");
  const std::string log = tmp / "run.jsonl";
  CHECK(truncate_step_log(log, 2) == 0);  // no log yet
  std::ofstream(log) << "{\"step\":0,\"loss\":5}\n{\"step\":1,\"loss\":4}\n{\"step\":2}\n"
                        "{\"step\":3}\n{\"step\":4,\"lo";
  CHECK(truncate_step_log(log, 2) == 3);
  std::ifstream in(log);
  const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(kept == "{\"step\":0,\"loss\":5}\n{\"step\":1,\"loss\":4}\n");
  CHECK(truncate_step_log(log, 2) == 0);  // nothing more to drop
  CHECK_FALSE(fs::exists(log + ".tmp"));
  CHECK(truncate_step_log("/dev/null", 0) == 0);  // not a regular file: left alone
}
