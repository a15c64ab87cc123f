#include "cp/conv_halo_impl.h"

namespace gdn {

template void conv_halo_forward<float, HostSpace<float>>(Communicator&, const float*, int,
                                                         std::int64_t, int, int, float*);
template void conv_halo_forward<double, HostSpace<double>>(Communicator&, const double*, int,
                                                           std::int64_t, int, int, double*);
template void conv_halo_backward<float, HostSpace<float>>(Communicator&, int, std::int64_t, int,
                                                          int, float*, float*);
template void conv_halo_backward<double, HostSpace<double>>(Communicator&, int, std::int64_t, int,
                                                            int, double*, double*);

}  // namespace gdn
