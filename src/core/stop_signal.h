// A graceful stop on a signal (docs/design.md §8). Slurm ends a job with SIGTERM
// (scancel, the time limit, preemption) and kills it KillWait (30 s) later; a job near its
// time limit can ask for SIGUSR1 first. The handler only records which signal came, so a
// signal can arrive anywhere (set-up, a step, a save, the export) without tearing
// anything; the trainer reads it at each step boundary, where the ranks agree to stop at
// the same step, save a checkpoint there and exit with kPreemptedExit. Further signals
// change nothing.
#pragma once

#include <string>
#include <vector>

namespace gdn::stop_signal {

// The exit status of a run stopped by a signal after saving its state: "preempted,
// resumable" (EX_TEMPFAIL of sysexits.h: try again later).
inline constexpr int kPreemptedExit = 75;

// "TERM,USR1" -> {SIGTERM, SIGUSR1}. Names with or without "SIG", any case, of the
// signals a job may be asked to stop by (TERM, INT, HUP, USR1, USR2, QUIT, XCPU); "none"
// for none. Errors name `what` and the bad item.
std::vector<int> parse(const std::string& list, const std::string& what);

// Records the first of `signals` that arrives from now on (received()). The handler is
// async-signal-safe and keeps SA_RESTART, so interrupted system calls go on.
void install(const std::vector<int>& signals);

// Gives these signals their default action again (a signal recorded stays recorded).
void restore_defaults(const std::vector<int>& signals);

// The first signal recorded since install(), 0 when none.
int received();

// "SIGTERM" for SIGTERM; "signal N" for others.
std::string name(int sig);

}  // namespace gdn::stop_signal
