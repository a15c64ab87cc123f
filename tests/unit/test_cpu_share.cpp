// Tests apps/common/cpu_share: the CPU list text and the warnings for ranks whose OpenMP
// threads outnumber the CPUs they may run on (alone, or together on a node).
#include <catch2/catch.hpp>

#include "common/cpu_share.h"

using namespace gdn::app;
using Catch::Contains;

TEST_CASE("cpu_list writes ranges", "[cpu_share]") {
  CHECK(cpu_list({}) == "none");
  CHECK(cpu_list({3}) == "3");
  CHECK(cpu_list({0, 1, 2, 3}) == "0-3");
  CHECK(cpu_list({0, 1, 4, 6, 7}) == "0-1,4,6-7");
}

TEST_CASE("cpu_share_warnings names crowded ranks and crowded nodes", "[cpu_share]") {
  // mpirun -np 2 by default: each rank bound to one core, two threads each.
  const std::vector<CpuShare> bound = {{"a", 2, {0}}, {"a", 2, {1}}};
  const std::vector<std::string> w = cpu_share_warnings(bound);
  REQUIRE(w.size() == 1);
  CHECK_THAT(w[0], Contains("2 of 2 ranks") && Contains("rank 0: 2 threads on CPU 0"));
  // Given their cores (--map-by slot:PE=2 on 4 cores): nothing to say.
  CHECK(cpu_share_warnings({{"a", 2, {0, 1}}, {"a", 2, {2, 3}}}).empty());
  // Unbound on one 2-core node, 2 threads each: 4 threads on 2 CPUs.
  const std::vector<std::string> node = cpu_share_warnings({{"a", 2, {0, 1}}, {"a", 2, {0, 1}}});
  REQUIRE(node.size() == 1);
  CHECK_THAT(node[0], Contains("node a: its 2 ranks run 4 OpenMP threads in all on 2 CPUs (0-1)"));
  // The same on two nodes: each has its own CPUs.
  CHECK(cpu_share_warnings({{"a", 2, {0, 1}}, {"b", 2, {0, 1}}}).empty());
}
