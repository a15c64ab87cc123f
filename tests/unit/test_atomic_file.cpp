// core/atomic_file: the one writer of result files. What a reader finds at the target is
// checked byte for byte after success, after every kind of failure (no directory, a
// directory in the way, a full disk, a rename onto a directory) and before commit().
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "test_support.h"

using namespace gdn;
using Catch::Contains;
using gdn::test::read_bytes;
using gdn::test::write_bytes;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Bytes that a text-mode or NUL-terminated writer would get wrong, and more than one
// small write.
std::string sample(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) % 256);
  return s;
}

}  // namespace

TEST_CASE("write_file_atomically creates and replaces the whole file", "[atomic_file]") {
  const test::TempDir d("gdn_test_atomic");
  const std::string p = d / "out.bin";
  const std::string big = sample(3 << 20);
  CHECK(write_file_atomically(p, big).empty());  // the directory sync works here
  CHECK(read_bytes(p) == big);
  CHECK(listing(d.dir.string()) == std::vector<std::string>{"out.bin"});  // no temporary
  // A shorter file replaces a longer one completely (no stale tail).
  write_file_atomically(p, std::string("new\0bytes", 9));
  CHECK(read_bytes(p) == std::string("new\0bytes", 9));
  write_file_atomically(p, "");
  CHECK(fs::exists(p));
  CHECK(fs::file_size(p) == 0);
  CHECK(listing(d.dir.string()) == std::vector<std::string>{"out.bin"});
}

TEST_CASE("AtomicFile shows nothing at the target before commit()", "[atomic_file]") {
  const test::TempDir d("gdn_test_atomic");
  const std::string p = d / "state.json", tmp = d / ".state.json.partial";
  write_bytes(p, "old content");
  {
    AtomicFile f(p, "ctx", tmp);
    CHECK(f.path() == p);
    CHECK(f.tmp_path() == tmp);
    f.write("abc", 3);
    f.write("defg", 4);
    CHECK(read_bytes(p) == "old content");  // readers still see the old file
    CHECK(fs::exists(tmp));
    CHECK(f.commit().empty());
    CHECK_THROWS_WITH(f.commit(), Contains("ctx: ") && Contains("commit() twice"));
  }
  CHECK(read_bytes(p) == "abcdefg");
  CHECK(listing(d.dir.string()) == std::vector<std::string>{"state.json"});

  SECTION("the default temporary is path + .tmp") {
    AtomicFile f(p);
    CHECK(f.tmp_path() == p + ".tmp");
    CHECK(fs::exists(p + ".tmp"));
  }
  SECTION("without commit() the temporary goes and the target stays as it was") {
    {
      AtomicFile f(p, "", tmp);
      f.write("half", 4);
    }
    CHECK(read_bytes(p) == "abcdefg");
    CHECK(listing(d.dir.string()) == std::vector<std::string>{"state.json"});
    {
      AtomicFile f(d / "never.bin");
      f.write("x", 1);
    }
    CHECK_FALSE(fs::exists(d / "never.bin"));
    CHECK(listing(d.dir.string()) == std::vector<std::string>{"state.json"});
  }
}

TEST_CASE("AtomicFile failures name the file and the OS's reason and leave no temporary",
          "[atomic_file]") {
  const test::TempDir d("gdn_test_atomic");
  SECTION("a directory that does not exist") {
    const std::string p = d / "no/such/dir/x.bin";
    CHECK_THROWS_WITH(write_file_atomically(p, "data", "write_thing"),
                      Contains("write_thing: cannot create '" + p + ".tmp'") && Contains(p) &&
                          Contains("No such file or directory"));
    CHECK(listing(d.dir.string()).empty());
  }
  SECTION("a regular file where the directory should be") {
    write_bytes(d / "a_file", "keep");
    const std::string p = d / "a_file/x.bin";
    CHECK_THROWS_WITH(write_file_atomically(p, "data"),
                      Contains("cannot create '" + p + ".tmp'") && Contains("Not a directory"));
    CHECK(read_bytes(d / "a_file") == "keep");
    CHECK(listing(d.dir.string()) == std::vector<std::string>{"a_file"});
  }
  SECTION("a directory without write permission") {
    // root writes anywhere: the permission check only means something for other users.
    if (::geteuid() == 0) {
      WARN("running as root: the unwritable-directory case is covered by the others");
    } else {
      const std::string sub = d / "ro";
      fs::create_directory(sub);
      write_bytes(sub + "/x.bin", "old");
      fs::permissions(sub, fs::perms::owner_read | fs::perms::owner_exec);
      CHECK_THROWS_WITH(write_file_atomically(sub + "/x.bin", "new"),
                        Contains(sub + "/x.bin") && Contains("Permission denied"));
      fs::permissions(sub, fs::perms::owner_all);
      CHECK(read_bytes(sub + "/x.bin") == "old");
      CHECK(listing(sub) == std::vector<std::string>{"x.bin"});
    }
  }
  SECTION("the disk fills up while writing: the old file survives") {
    if (!fs::exists("/dev/full")) {
      WARN("no /dev/full here");
      return;
    }
    const std::string p = d / "model.bin";
    write_bytes(p, "the old, complete file");
    fs::create_symlink("/dev/full", p + ".tmp");  // every write to the temporary fails
    AtomicFile f(p, "save");
    CHECK_THROWS_WITH(f.write("new", 3), Contains("save: cannot write '" + p + ".tmp'") &&
                                             Contains("No space left on device"));
    CHECK_THROWS_WITH(f.write("more", 4), Contains("after a failed write"));
    CHECK_THROWS_WITH(f.commit(), Contains("after a failed write"));
    CHECK(read_bytes(p) == "the old, complete file");
    CHECK(listing(d.dir.string()) == std::vector<std::string>{"model.bin"});
  }
  SECTION("the rename fails: a directory is in the way") {
    const std::string p = d / "in_the_way";
    fs::create_directories(p + "/inside");
    CHECK_THROWS_WITH(
        write_file_atomically(p, "data"),
        Contains("cannot rename '" + p + ".tmp' to '" + p + "'") && Contains("Is a directory"));
    CHECK(fs::is_directory(p + "/inside"));
    CHECK(listing(d.dir.string()) == std::vector<std::string>{"in_the_way"});
  }
}
