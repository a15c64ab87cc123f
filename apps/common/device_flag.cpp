#include "common/device_flag.h"

#include "core/error.h"
#if GDN_HAVE_CUDA
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

}  // namespace gdn::app
