#include "common/app_common.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <new>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "comm/call_sites.h"
#include "core/error.h"
#include "core/json_reader.h"

namespace gdn::app {

void report_model_keys(const std::string& source, const std::vector<std::string>& ignored,
                       const std::vector<std::string>& notes) {
  if (!ignored.empty()) {
    std::string keys;
    for (const auto& k : ignored) keys += (keys.empty() ? "" : ", ") + k;
    spdlog::warn("{}: keys with no effect on the math, not used: {}", source, keys);
  }
  for (const std::string& note : notes) spdlog::info("{}", note);
}

void keep_freed_memory() {
#if defined(__GLIBC__)
  // glibc maps blocks past its (adaptive) threshold fresh from the kernel and trims the
  // heap's free top: a step's per-layer buffers then page-fault and are zeroed by the kernel
  // every step (~50K faults a step at bench-step.json). Blocks up to 32 MiB (glibc's
  // largest threshold) now come from the heap, and freed memory stays for the next step:
  // the peak stays where it was, as with a caching allocator.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

void setup_logging(const std::string& tool) {
  auto logger = spdlog::stderr_logger_mt(tool);
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%n] [%l] %v");
}

bool run_setup_collectively(Communicator& comm, const std::function<void()>& fn) {
  std::string message;
  bool failed = false;
  try {
    fn();
  } catch (const std::bad_alloc&) {
    failed = true;
    message =
        "out of memory during set-up (std::bad_alloc): the run needs more memory than "
        "this rank could get";
  } catch (const std::exception& e) {
    failed = true;
    message = e.what();
  }
  // max over ranks of (P - rank) for failing ranks identifies the lowest failing rank,
  // and 0 means nobody failed. The one all-reduce is also the agreement point.
  const int P = comm.size(), r = comm.rank();
  std::int32_t flag = failed ? P - r : 0;
  comm.all_reduce_max(&flag, 1, app_sites::kSetupAgree);
  if (flag == 0) return true;
  if (failed && P - flag == r) spdlog::error("rank {}: {}", r, message);
  return false;
}

std::optional<cxxopts::ParseResult> parse_command_line(cxxopts::Options& options, int argc,
                                                       char** argv) {
  auto res = options.parse(argc, argv);
  if (res.count("help")) return std::nullopt;
  GDN_CHECK(res.unmatched().empty(), "unexpected argument '", res.unmatched().front(),
            "' (see --help)");
  return res;
}

void run_or_abort_job(Communicator& comm, const std::function<void()>& fn) {
  std::string message;
  try {
    fn();
    return;
  } catch (const std::bad_alloc&) {
    message = "out of memory (std::bad_alloc)";
  } catch (const std::exception& e) {
    message = e.what();
  }
  spdlog::error("rank {}: {}", comm.rank(), message);
  spdlog::default_logger()->flush();
  comm.abort(1);
}

std::string make_heartbeat_dir(Communicator& comm) {
  constexpr std::size_t kMax = 512;
  std::string mine(kMax, '\0');
  if (comm.rank() == 0) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/gdn-heartbeat-XXXXXX";
    if (tmpl.size() < kMax && ::mkdtemp(tmpl.data())) mine.replace(0, tmpl.size(), tmpl);
  }
  std::string all(kMax * std::size_t(comm.size()), '\0');
  comm.all_gather(mine.data(), all.data(), kMax, "app.heartbeat_dir");
  const std::string dir = all.substr(0, all.find('\0'));
  if (!dir.empty() && comm.rank() != 0) {
    std::error_code ec;  // on rank 0's node it exists already
    std::filesystem::create_directories(dir, ec);
  }
  return dir;
}

double number_in_range(const std::string& text, const std::string& flag, double lo, double hi,
                       const std::string& unit) {
  const std::optional<double> v = parse_decimal(text);
  GDN_CHECK(v && *v >= lo && *v <= hi, "--", flag, " ", text, ": expected a number of ", unit,
            " in [", lo, ", ", hi, "]");
  return *v;
}

std::vector<std::int64_t> parse_int_list(const std::string& s, char sep, const std::string& what) {
  std::vector<std::int64_t> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(sep, pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    GDN_CHECK(!item.empty() && used == item.size(), what, ": '", item, "' in '", s,
              "' is not an integer (expected integers separated by '", sep, "')");
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

std::vector<GdnProblem> parse_gdn_shapes(const std::string& spec, int chunk_size) {
  std::vector<GdnProblem> shapes;
  for (std::size_t pos = 0; pos < spec.size();) {
    const std::size_t end = std::min(spec.find(';', pos), spec.size());
    const auto v = parse_int_list(spec.substr(pos, end - pos), ',', "--shapes");
    GDN_CHECK(v.size() == 6, "--shapes: '", spec.substr(pos, end - pos), "' has ", v.size(),
              " numbers, expected 6: B,T,Hk,Hv,K,V");
    GdnProblem p;
    p.B = int(v[0]), p.T = v[1], p.Hk = int(v[2]), p.Hv = int(v[3]), p.K = int(v[4]),
    p.V = int(v[5]);
    p.chunk_size = chunk_size;
    p.validate();
    shapes.push_back(p);
    pos = end + 1;
  }
  return shapes;
}

double median(std::vector<double> xs) {
  GDN_CHECK(!xs.empty(), "median of an empty sample");
  std::sort(xs.begin(), xs.end());
  const std::size_t n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

int serial_main(const std::string& tool, int (*run)(int, char**), int argc, char** argv) {
  keep_freed_memory();
  setup_logging(tool);
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace gdn::app
