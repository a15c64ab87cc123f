// The log-depth pair scan on the GPU: not there yet (cp/log_depth_scan.h).
#include "core/error.h"
#include "cp/log_depth_scan.h"
#include "runtime/cuda_device.h"

namespace gdn {

template <typename T>
void log_depth_scan(Cuda, Communicator&, const T*, const T*, const PairDims&, bool,
                    const std::string&, T*) {
  throw Error("--log-depth-scan is not available on the CUDA path yet: use the all-gather scan");
}

template void log_depth_scan(Cuda, Communicator&, const float*, const float*, const PairDims&, bool,
                             const std::string&, float*);
template void log_depth_scan(Cuda, Communicator&, const double*, const double*, const PairDims&,
                             bool, const std::string&, double*);

}  // namespace gdn
