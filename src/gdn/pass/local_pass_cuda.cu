// The GPU passes of LocalPass for float, and the functions that are no templates; the
// kernels and passes are in local_pass_cuda.cuh (double: local_pass_cuda_f64.cu).
#include "gdn/pass/local_pass_cuda.cuh"

namespace gdn::pass {

namespace {
int tf32_mode = -1;  // set_cuda_tf32
}  // namespace

void set_cuda_tf32(int mode) {
  tf32_mode = mode;
}

bool cuda_tf32() {
  if (tf32_mode >= 0) return tf32_mode == 1;
  const char* env = std::getenv("GDN_CUDA_TF32");
  return env && std::string(env) == "1";
}

bool needs_prepare(Cuda) {
  return true;
}

bool chunk_parallel_backward(Cuda) {
  return true;
}

int grad_scratch_heads(Cuda, int G) {
  return G;
}

}  // namespace gdn::pass

GDN_LOCAL_PASS_CUDA_INSTANTIATE(float)
