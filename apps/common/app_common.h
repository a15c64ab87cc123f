// Helpers shared by the gdn-cp command-line tools: logging set-up and the collective
// set-up phase that turns a failure on any rank into one message and a clean exit on all.
#pragma once

#include <cstdint>
#include <cxxopts.hpp>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "common/cpu_share.h"
#include "gdn/problem.h"

namespace gdn::app {

// Routes spdlog to stderr (stdout stays free for data such as gdn_bench's JSON lines),
// named after the tool, without colour codes (mpirun output is usually not a terminal).
void setup_logging(const std::string& tool);

// Runs `fn` (argument parsing, file reading, validation: no collectives inside) on every
// rank, then agrees on the outcome with one all-reduce. If any rank threw, the lowest
// failing rank logs its message once ("rank R: ...") and every rank gets false, so all can
// exit with code 1 together instead of leaving the others waiting in a later collective.
bool run_setup_collectively(Communicator& comm, const std::function<void()>& fn);

// Parses the command line; nullopt when --help was asked for. Arguments that are not
// options are an error naming the first one.
std::optional<cxxopts::ParseResult> parse_command_line(cxxopts::Options& options, int argc,
                                                       char** argv);

// Past set-up, another rank may be waiting in a collective, so a failure on one rank must
// end them all: runs fn, and on an exception prints "rank R: <what>" once from this rank
// (std::bad_alloc as an out-of-memory message) and aborts the whole job.
void run_or_abort_job(Communicator& comm, const std::function<void()>& fn);

// A fresh directory for the watchdog's heartbeats (core/heartbeat.h), the same name on
// every rank: rank 0 makes it under $TMPDIR (or /tmp), and ranks on other nodes create
// that path there, so the ranks of each node see each other's. "" when rank 0 cannot make
// one (the watchdog then names only its own rank). Collective over comm.
std::string make_heartbeat_dir(Communicator& comm);

// The number a flag's text gives, in [lo, hi]; errors name --flag, the text and the
// range with `unit` ("MB", "seconds").
double number_in_range(const std::string& text, const std::string& flag, double lo, double hi,
                       const std::string& unit);

// "0,100,250" -> {0, 100, 250}. Errors name `what` and the bad item.
std::vector<std::int64_t> parse_int_list(const std::string& s, char sep, const std::string& what);

// The benchmarks' --shapes: "B,T,Hk,Hv,K,V;..." -> validated problems at chunk_size.
std::vector<GdnProblem> parse_gdn_shapes(const std::string& spec, int chunk_size);

// main() of an MPI tool: MPI and logging set up, the command line parsed by `options` and
// then by parse(result, world size) into a Setup, collectively (a failure on any rank: one
// message, exit code 1 on all); --help printed by rank 0, else the ranks' threads and CPUs
// reported (report_cpu_share) and run(world, setup), whose code is returned.
// Keeps freed memory in the process for reuse (glibc's malloc options; elsewhere nothing).
void keep_freed_memory();

template <typename Setup, typename Parse, typename Run>
int mpi_main(int argc, char** argv, const std::string& tool, cxxopts::Options options, Parse parse,
             Run run) {
  keep_freed_memory();
  MpiRuntime mpi(&argc, &argv);
  MpiCommunicator world;  // ended before MpiRuntime ends MPI
  setup_logging(tool);
  std::optional<cxxopts::ParseResult> parsed;
  Setup s;
  const bool ok = run_setup_collectively(world, [&] {
    parsed = parse_command_line(options, argc, argv);
    if (parsed) s = parse(*parsed, world.size());
  });
  if (!ok) return 1;
  if (parsed) {
    report_cpu_share(world);
    return run(world, s);
  }
  if (world.rank() == 0) std::cout << options.help() << std::endl;
  return 0;
}

// main() of a serial tool: keeps freed memory as mpi_main does (the benchmarks then time
// the GEMMs' scratch as the trainer gets it, not mmap'd and faulted in on every call),
// sets up logging, runs `run`, and turns an exception into one error line and exit code 1.
int serial_main(const std::string& tool, int (*run)(int, char**), int argc, char** argv);

// The model config's keys with no effect on the math (one warning line naming them and
// `source`) and the notes on how keys were read (one info line each); on rank 0 only.
void report_model_keys(const std::string& source, const std::vector<std::string>& ignored,
                       const std::vector<std::string>& notes);

// Median of a non-empty sample (mean of the middle two for an even count).
double median(std::vector<double> xs);

}  // namespace gdn::app
