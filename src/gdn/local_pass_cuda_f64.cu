// The GPU passes of LocalPass for double (local_pass_cuda_kernels.cuh), in a translation
// unit of their own so that nvcc compiles them beside the float ones.
#include "gdn/local_pass_cuda_kernels.cuh"

namespace gdn::pass {

template std::size_t workspace_elems(Cuda, const PassArgs<double>&);
template void prepare(Cuda, const PassArgs<double>&);
template void transition(Cuda, const PassArgs<double>&, double*, double*);
template void output(Cuda, const PassArgs<double>&, const double*, double*, double*);
template void output_from_states(Cuda, const PassArgs<double>&, double*, double*);
template void adjoint(Cuda, const PassArgs<double>&, const double*, const double*, double*);
template void backward(Cuda, const PassArgs<double>&, const double*, const double*, const double*,
                       GdnGradView<double>&, double*, double*);

}  // namespace gdn::pass
