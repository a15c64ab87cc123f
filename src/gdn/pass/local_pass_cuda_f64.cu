// The GPU passes of LocalPass for double (local_pass_cuda.cuh), in a translation
// unit of their own so that nvcc compiles them beside the float ones.
#include "gdn/pass/local_pass_cuda.cuh"

GDN_LOCAL_PASS_CUDA_INSTANTIATE(double)
