// GdnLayer and GdnModel on the device: the code of model/gdn_layer_impl.h and
// model/model_impl.h instantiated for CudaBackend, and the conv halo for the device space.
#include "cp/conv_halo_impl.h"
#include "cuda/cuda_backend.h"
#include "model/model_impl.h"

namespace gdn {

template void conv_halo_forward<float, CudaSpace<float>>(Communicator&, const float*, int,
                                                         std::int64_t, int, int, float*);
template void conv_halo_forward<double, CudaSpace<double>>(Communicator&, const double*, int,
                                                           std::int64_t, int, int, double*);
template void conv_halo_backward<float, CudaSpace<float>>(Communicator&, int, std::int64_t, int,
                                                          int, float*, float*);
template void conv_halo_backward<double, CudaSpace<double>>(Communicator&, int, std::int64_t, int,
                                                            int, double*, double*);

template class GdnLayer<float, CudaBackend<float>>;
template class GdnLayer<double, CudaBackend<double>>;
template class GdnModel<float, CudaBackend<float>>;
template class GdnModel<double, CudaBackend<double>>;

}  // namespace gdn
