// The Communicator for the GPU path: NCCL when every rank has a GPU of its own, MPI with
// host staging when ranks share one (NCCL refuses that). Part of the CUDA build only.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/communicator.h"

namespace gdn {

// Collective over world. Picks and sets this rank's GPU (choose_gpu), sets the rank for
// GPU error messages if unset, and returns an NcclCommunicator, or a StagingCommunicator
// (with one warning on world rank 0) when ranks share a GPU. Every rank gets the same kind.
// Throws gdn::Error on every rank when some rank sees no GPU.
std::unique_ptr<Communicator> make_device_communicator(MPI_Comm world = MPI_COMM_WORLD);

}  // namespace gdn
