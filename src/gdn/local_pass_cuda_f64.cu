// The GPU passes of LocalPass for double (local_pass_cuda_kernels.cuh), in a translation
// unit of their own so that nvcc compiles them beside the float ones.
#include "gdn/local_pass_cuda_kernels.cuh"

GDN_LOCAL_PASS_CUDA_INSTANTIATE(double)
