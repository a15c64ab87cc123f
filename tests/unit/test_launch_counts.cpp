// The GPU passes' launch record (gdn/chunk/launch_counts.h), on the CPU: the counts and their
// report, and the reason a register kernel is not taken, for each condition in its order.
// The GPU tests assert on the same record which path ran. And test_support's bit_difference,
// which names what differs when a bit comparison fails.
#include <catch2/catch.hpp>
#include <limits>

#include "gdn/chunk/launch_counts.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::pass;

TEST_CASE("launch counts: per phase, in first-launch order, with the last fallback", "[launch]") {
  reset_launch_counts();
  count_launch("prepare", KernelPath::bf16_register);
  count_launch("state_walk", KernelPath::tiled);
  count_launch("prepare", KernelPath::bf16_register);
  note_fallback("state_walk", "first");
  note_fallback("state_walk", "train.cuda_walk tiled");
  const std::vector<PhaseLaunches> c = launch_counts();
  REQUIRE(c.size() == 2);
  CHECK(c[0].phase == "prepare");
  CHECK(c[0].bf16_register == 2);
  CHECK(c[0].tiled == 0);
  CHECK(c[1].phase == "state_walk");
  CHECK(c[1].tiled == 1);
  CHECK(format_launch_counts() ==
        "prepare: 2 register, 0 tiled\n"
        "state_walk: 0 register, 1 tiled; fallback: train.cuda_walk tiled\n");
  reset_launch_counts();
  CHECK(launch_counts().empty());
}

TEST_CASE("register kernels: the first reason they cannot run, naming the value", "[launch]") {
  RegisterConditions c;
  c.bf16_mode = true, c.shape_supported = true, c.factors_aligned = true;
  c.C = 64, c.K = 128, c.V = 128, c.bv = 64;
  c.compute_major = 9, c.smem = 100000, c.smem_optin = 232448;
  CHECK(register_fallback_reason(c) == "");
  RegisterConditions x = c;
  x.smem = 300000;
  CHECK(register_fallback_reason(x) ==
        "needs 300000 bytes of shared memory, the device allows 232448");
  x.compute_major = 7;
  CHECK(register_fallback_reason(x) ==
        "compute capability 7.x has no cp.async (needs 8.0 or later)");
  x.dO_aligned = false;
  CHECK(register_fallback_reason(x) == "dO is not 16-byte aligned");
  x.factors_aligned = false;
  CHECK(register_fallback_reason(x) == "the WY factors are not 16-byte aligned");
  x.shape_supported = false, x.K = 96;
  CHECK_THAT(register_fallback_reason(x), Catch::StartsWith("shape C = 64, K = 96, V = 128, walk "
                                                            "width 64"));
  x.tiled_forced = true;
  CHECK(register_fallback_reason(x) == "train.cuda_walk tiled");
  x.bf16_mode = false;
  CHECK_THAT(register_fallback_reason(x), Catch::StartsWith("not the bf16 mode"));
}

TEST_CASE("bit_difference names the first and the largest difference", "[launch]") {
  const std::vector<float> a{1.0f, 2.0f, 3.0f, 4.0f};
  CHECK(test::bit_difference(a, a) == "");
  CHECK(test::bit_difference(a, std::vector<float>{1.0f}) == "lengths 4 and 1");
  const std::vector<float> b{1.0f, 2.5f, 3.0f, 1.0f};
  CHECK(test::bit_difference(a, b) ==
        "2 of 4 elements differ; first [1]: 2 vs 2.5; largest |a - b| = 3 at [3]");
  // -0.0 and 0.0 compare equal but are other bits.
  CHECK(test::bit_difference(std::vector<double>{0.0}, std::vector<double>{-0.0}) ==
        "1 of 1 elements differ; first [0]: 0 vs -0; largest |a - b| = 0 at [0]");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THAT(test::bit_difference(std::vector<double>{1, 2}, std::vector<double>{1, nan}),
             Catch::EndsWith("largest |a - b| = nan at [1]"));
}
