// How many OpenMP threads each rank runs and on which CPUs it may run them. Open MPI binds
// each rank of a 1- or 2-process job to one core by default, so `mpirun -np 1` runs all of
// a rank's threads on one core and nothing else says so: every tool reports it at start-up.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"

namespace gdn::app {

// This process: its OpenMP threads (omp_get_max_threads) and the CPUs of its affinity mask.
struct CpuShare {
  std::string host;
  int threads = 1;
  std::vector<int> cpus;
};
CpuShare this_cpu_share();

// "0-3,8,10-11".
std::string cpu_list(const std::vector<int>& cpus);

// The warnings for a job's shares (one per rank, in rank order): ranks whose threads
// outnumber their CPUs, and nodes whose ranks' threads together outnumber the CPUs they
// may run on (unbound ranks sharing cores). Empty when every thread has a CPU.
std::vector<std::string> cpu_share_warnings(const std::vector<CpuShare>& ranks);

// Where OMP_NUM_THREADS is not set and this process (its share s) may run on fewer CPUs
// than OpenMP's default thread count, runs one thread per CPU of its affinity mask (and
// says so in s); true when it did.
bool fit_threads_to_cpus(CpuShare& s);

// Collective over world: each rank first fits its threads (fit_threads_to_cpus), then rank 0 logs
// one line (threads per rank and rank 0's CPUs) and each warning of cpu_share_warnings once, with
// how to launch instead.
void report_cpu_share(Communicator& world);

}  // namespace gdn::app
