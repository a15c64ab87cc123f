#include "comm/device_communicator.h"

#include <spdlog/spdlog.h>

#include <atomic>

#include "comm/nccl_communicator.h"
#include "comm/staging_communicator.h"
#include "runtime/cuda_check.h"
#include "runtime/device_select.h"

namespace gdn {

std::unique_ptr<Communicator> make_device_communicator(MPI_Comm world) {
  int world_rank = 0;
  MPI_Comm_rank(world, &world_rank);
  if (message_rank() < 0) set_message_rank(world_rank);

  const GpuChoice g = choose_gpu(world);  // throws on every rank if some rank has no GPU
  if (g.shared) {
    // Once per process: tests and sub-meshes may build several device communicators.
    static std::atomic<bool> warned{false};
    if (world_rank == 0 && !warned.exchange(true))
      spdlog::warn(
          "ranks share a GPU: NCCL refuses two ranks on one device; falling back to MPI with "
          "host staging (slower; for checking CP on a one-GPU machine)");
    return std::make_unique<StagingCommunicator>(world);
  }
  return std::make_unique<NcclCommunicator>(world, g.device);
}

}  // namespace gdn
