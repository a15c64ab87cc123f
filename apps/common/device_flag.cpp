#include "common/device_flag.h"

#include <mpi.h>

#include "comm/call_sites.h"
#include "core/error.h"
#if GDN_HAVE_CUDA
#include "comm/device_communicator.h"
#include "runtime/device_select.h"
#endif

namespace gdn::app {

Device resolve_device(const std::string& flag) {
  GDN_CHECK(flag == "auto" || flag == "cpu" || flag == "cuda", "--device ", flag,
            " is not known: expected auto, cpu or cuda");
  if (flag == "cpu") return Device::cpu;
#if GDN_HAVE_CUDA
  std::string why;
  const int gpus = visible_gpu_count(&why);
  if (gpus > 0) return Device::cuda;
  GDN_CHECK(flag == "auto", "--device cuda: no GPU is visible (", why, "); use --device cpu");
  return Device::cpu;
#else
  GDN_CHECK(flag == "auto",
            "--device cuda: this build has no CUDA path (nvcc or NCCL was not found when it "
            "was configured); use --device cpu");
  return Device::cpu;
#endif
}

const char* device_name(Device d) {
  return d == Device::cuda ? "cuda" : "cpu";
}

void require_same_device(Communicator& world, Device d) {
  int hi = int(d), neg_lo = -int(d);
  world.all_reduce_max(&hi, 1, app_sites::kDevice);
  world.all_reduce_max(&neg_lo, 1, app_sites::kDevice);
  GDN_CHECK(hi == -neg_lo,
            "--device: some ranks see a GPU and some do not; pass --device cpu "
            "or run every rank where a GPU is visible");
}

std::unique_ptr<Communicator> make_device_world(Device d) {
#if GDN_HAVE_CUDA
  if (d == Device::cuda) return make_device_communicator(MPI_COMM_WORLD);
#endif
  (void)d;
  return nullptr;
}

}  // namespace gdn::app
