// Error checks for CUDA runtime, cuBLAS and NCCL calls. A failure becomes a gdn::Error
// naming the call text, the library's error name and string, file:line and the MPI rank,
// and travels up the stack like every other error: nothing exits deep inside, so the app
// can report it once and abort the job cleanly (with NCCL, a rank that just exits leaves
// its peers hanging in a collective).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "core/error.h"

namespace gdn {

// The rank printed in GPU error messages ("rank 3"). Process-wide, set once at start-up
// (make_device_communicator does it if nobody has); -1, the default, prints "rank ?".
// These checks run far from any Communicator, so they cannot ask one for the rank.
void set_message_rank(int rank);
int message_rank();

namespace detail {

// "<call> failed[ at site '<site>']: <what> at <file>:<line> on rank <r>"
[[noreturn]] void throw_gpu_error(const char* call, const std::string& what, const char* file,
                                  int line, const std::string& site);
std::string cuda_error_text(cudaError_t e);
std::string cublas_error_text(cublasStatus_t s);
std::string nccl_error_text(ncclResult_t r);

}  // namespace detail
}  // namespace gdn

// The _AT forms add a call-site name (the Communicator's "cp.fwd.allgather" and so on).
#define GDN_CUDA_CHECK_AT(expr, site)                                                      \
  do {                                                                                     \
    const cudaError_t gdn_cuda_err_ = (expr);                                              \
    if (gdn_cuda_err_ != cudaSuccess)                                                      \
      ::gdn::detail::throw_gpu_error(#expr, ::gdn::detail::cuda_error_text(gdn_cuda_err_), \
                                     __FILE__, __LINE__, (site));                          \
  } while (0)

#define GDN_CUBLAS_CHECK_AT(expr, site)                                                       \
  do {                                                                                        \
    const cublasStatus_t gdn_cublas_st_ = (expr);                                             \
    if (gdn_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                              \
      ::gdn::detail::throw_gpu_error(#expr, ::gdn::detail::cublas_error_text(gdn_cublas_st_), \
                                     __FILE__, __LINE__, (site));                             \
  } while (0)

#define GDN_NCCL_CHECK_AT(expr, site)                                                      \
  do {                                                                                     \
    const ncclResult_t gdn_nccl_res_ = (expr);                                             \
    if (gdn_nccl_res_ != ncclSuccess)                                                      \
      ::gdn::detail::throw_gpu_error(#expr, ::gdn::detail::nccl_error_text(gdn_nccl_res_), \
                                     __FILE__, __LINE__, (site));                          \
  } while (0)

#define GDN_CUDA_CHECK(expr) GDN_CUDA_CHECK_AT(expr, "")
#define GDN_CUBLAS_CHECK(expr) GDN_CUBLAS_CHECK_AT(expr, "")
#define GDN_NCCL_CHECK(expr) GDN_NCCL_CHECK_AT(expr, "")
