// The paths a run reads and writes, checked against each other at start-up (rank 0,
// which writes every output but the checkpoint parts): a run never writes over its own
// input, names one output twice, nor writes inside another live run's checkpoint
// directory. Paths are compared resolved (links, "." and "..") and by inode, so two
// spellings of one file are one file.
#pragma once

#include <string>
#include <vector>

namespace gdn {

struct RunPath {
  std::string flag;  // "--data", "--log", ...
  std::string path;
};

struct RunPaths {
  std::vector<RunPath> inputs;    // files and folders read (a folder: every file in it)
  std::vector<RunPath> outputs;   // files written (appended to, or replaced)
  std::vector<RunPath> replaced;  // folders replaced whole at the end (the export)
  std::string checkpoint_dir;     // this run's, "" for none
};

// The files of the data a run reads: the file itself, or a Megatron dataset's .bin and
// .idx; none for synthetic data.
std::vector<std::string> data_files(const std::string& data);

// Throws gdn::Error naming both flags and paths when an output is an input (same file),
// two outputs are one, an input, an output or the checkpoint directory lies in a
// replaced folder (or holds it), or an output lies inside the checkpoint directory of
// another live run (judged with stale_s, train/run_lock.h).
void check_run_paths(const RunPaths& paths, double stale_s);

}  // namespace gdn
