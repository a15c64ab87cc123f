// core/profile.h and train/step_profile.h: time is charged exclusively (a scope stops its
// parent's clock), GEMM scopes take the region's name, the rest of a region is its
// "elementwise", only the enabling thread records, and a step's components with "other"
// add up to its wall time. Sleeps give each part a known lower bound; the one upper bound
// is the outer wall time, which exclusive charging can never exceed.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "core/profile.h"
#include "train/step_profile.h"

using namespace gdn;
using namespace std::chrono_literals;

namespace {
double ms_of(const std::map<std::string, profile::Entry>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? -1.0 : 1000.0 * it->second.seconds;
}
struct EnableGuard {
  EnableGuard() { profile::enable(true); }
  ~EnableGuard() { profile::enable(false); }
};
}  // namespace

TEST_CASE("profile charges each scope's own time to its component", "[profile]") {
  EnableGuard guard;
  profile::take();
  const auto t0 = std::chrono::steady_clock::now();
  {
    const profile::Region gdn("gdn");
    std::this_thread::sleep_for(10ms);  // elementwise.gdn
    {
      const profile::Scope gemm(profile::kGemm, profile::Charge::by_region);
      std::this_thread::sleep_for(20ms);
      const profile::Scope comm("comm.", "site");  // nested in the GEMM: its own key
      std::this_thread::sleep_for(5ms);
    }
    {
      const profile::Scope core("gdn_core");
      std::this_thread::sleep_for(15ms);
      const profile::Scope gemm(profile::kGemm,
                                profile::Charge::by_region);  // still the gdn region
      std::this_thread::sleep_for(5ms);
    }
  }
  {
    const profile::Scope gemm(profile::kGemm,
                              profile::Charge::by_region);  // no region: plain "gemm"
    std::this_thread::sleep_for(5ms);
  }
  const double wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const auto m = profile::take();
  CHECK(ms_of(m, "elementwise.gdn") >= 10);
  CHECK(ms_of(m, "gemm.gdn") >= 25);
  CHECK(ms_of(m, "comm.site") >= 5);
  CHECK(ms_of(m, "gdn_core") >= 15);
  CHECK(ms_of(m, "gemm") >= 5);
  CHECK(m.at("gemm.gdn").calls == 2);
  CHECK(m.at("elementwise.gdn").calls == 1);
  CHECK(m.size() == 5);
  double sum = 0;
  for (const auto& [key, e] : m) sum += 1000.0 * e.seconds;
  CHECK(sum <= wall + 1e-6);       // nothing counted twice
  CHECK(profile::take().empty());  // take() starts afresh
}

// What set_wait stands in for: a device whose queued work takes 20 ms, done at the wait.
int g_waits = 0;
void slow_device() {
  ++g_waits;
  std::this_thread::sleep_for(20ms);
}

TEST_CASE("profile waits for the device before each clock read when told to", "[profile]") {
  EnableGuard guard;
  profile::take();
  profile::set_wait(&slow_device);
  g_waits = 0;
  {
    const profile::Region head("head");
    const profile::Scope gemm(profile::kGemm, profile::Charge::by_region);
  }  // the GEMM's "queued work" is charged to it, not to whoever waits later
  const auto m = profile::take();
  profile::set_wait(nullptr);
  CHECK(g_waits == 5);  // two pushes, two pops, take()
  CHECK(ms_of(m, "gemm.head") >= 20);
  CHECK(ms_of(m, "elementwise.head") >= 20);  // the wait at the GEMM's push: the region's
  g_waits = 0;
  { const profile::Scope s("x"); }
  profile::take();
  CHECK(g_waits == 0);  // reset: no waits
}

TEST_CASE("profile records nothing when off, or on another thread", "[profile]") {
  profile::enable(false);
  profile::take();
  {
    const profile::Region r("gdn");
    const profile::Scope s("gdn_core");
  }
  CHECK(profile::take().empty());
  EnableGuard guard;
  std::thread other([] {
    const profile::Region r("moe");
    const profile::Scope s(profile::kGemm, profile::Charge::by_region);
  });
  other.join();
  CHECK(profile::take().empty());
}

TEST_CASE("a step profile adds up to the step and groups by component", "[profile]") {
  std::map<std::string, profile::Entry> rec;
  rec["gemm.gdn"].seconds = 0.030;
  rec["gemm.moe"].seconds = 0.020;
  rec["gdn_core"].seconds = 0.010;
  const StepProfile p = to_step_profile(rec, 100.0);
  CHECK(p.at("gemm.gdn") == Approx(30.0));
  CHECK(p.at("other") == Approx(40.0));
  double sum = 0;
  for (const auto& [k, ms] : p) sum += ms;
  CHECK(sum == Approx(100.0));
  const auto lines = profile_table({p, p});
  REQUIRE(lines.size() == 4 + 1 + 3);                  // 4 components, the group header, 3 groups
  CHECK(lines[0].find("other") != std::string::npos);  // largest first
  CHECK(lines[0].find("40.0 ms") != std::string::npos);
  CHECK(lines[5].find("gemm") != std::string::npos);  // the gemm group: 50 ms
  CHECK(lines[5].find("50.0 ms") != std::string::npos);
}
