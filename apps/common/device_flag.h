// --device auto|cpu|cuda, shared by the apps. auto means cuda when this build has the
// CUDA path and a GPU is visible, else cpu; asking for cuda where that is impossible is
// an error that says why.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"

namespace gdn::app {

enum class Device { cpu, cuda };

Device resolve_device(const std::string& flag);
const char* device_name(Device d);

// --device auto resolves on each rank: a job where only some ranks see a GPU must not
// split into CPU and GPU ranks. Collective over world; throws, saying so, on every rank.
void require_same_device(Communicator& world, Device d);

// The device communicator of every rank of MPI_COMM_WORLD on cuda (NCCL, or MPI with host
// staging where ranks share a GPU), this rank's GPU chosen before anything is allocated
// there; null on cpu (the world communicator serves). Collective.
std::unique_ptr<Communicator> make_device_world(Device d);

}  // namespace gdn::app
