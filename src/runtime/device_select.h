// One GPU per MPI process: which device this rank uses, and whether ranks on one node
// would have to share a device (NCCL refuses that; the caller falls back to staging).
// Plain C++ over the CUDA runtime API; part of the CUDA build only.
#pragma once

#include <mpi.h>

#include <string>

namespace gdn {

// Number of devices the CUDA runtime can use here. 0, never an exception, when
// cudaGetDeviceCount fails (no device, no driver, "driver insufficient"), so callers can
// ask it on any machine. When why is given, it receives the reason for a 0.
int visible_gpu_count(std::string* why = nullptr);

struct LocalRank {
  int rank = 0;  // this process's index among the ranks of `world` on its node
  int size = 1;  // number of ranks of `world` on this node
};

// Collective over world. size comes from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). rank
// comes from the first of these that holds an integer in [0, size):
//   1. OMPI_COMM_WORLD_LOCAL_RANK: set per process by Open MPI's launcher, so it is right
//      even under mpirun inside a Slurm allocation, where every rank inherits the batch
//      shell's SLURM_LOCALID (0 for all);
//   2. SLURM_LOCALID: set per task by srun;
//   3. the rank in the shared-memory split (ordered by world rank).
// A value outside [0, size) describes some other job (an inherited variable) and is
// skipped rather than trusted.
LocalRank node_local_rank(MPI_Comm world);

struct GpuChoice {
  int device = -1;      // the CUDA device made current (cudaSetDevice) on this rank
  bool shared = false;  // some two ranks of world on one node use the same physical GPU
  int visible = 0;      // devices visible to this rank
  LocalRank local;
};

// Collective over world: picks device = local rank % visible devices and makes it current.
// shared compares device UUIDs across the node, so ranks that each see a different single
// GPU (CUDA_VISIBLE_DEVICES set per rank by the launcher) do not count as sharing; and it
// is agreed over all of world (true if true on any node), so every rank takes the same
// backend. Throws gdn::Error on every rank when any rank sees no GPU.
GpuChoice choose_gpu(MPI_Comm world);

// The name of this rank's current GPU ("NVIDIA H100 80GB HBM3"): what its peak FLOP/s are
// looked up by (plan/peak.h).
std::string current_gpu_name();

}  // namespace gdn
