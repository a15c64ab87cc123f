// GdnContextParallel on the device: the orchestration of src/cp/gdn_cp_impl.h, written
// once, instantiated for CudaSpace (kernels and device buffers).
#include "cp/gdn_cp_impl.h"
#include "cuda/cuda_space.h"

namespace gdn {

template class GdnContextParallel<float, CudaSpace<float>>;
template class GdnContextParallel<double, CudaSpace<double>>;

}  // namespace gdn
