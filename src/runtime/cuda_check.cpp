#include "runtime/cuda_check.h"

#include <atomic>
#include <sstream>

namespace gdn {

namespace {
// Atomic: GPU errors may be raised on helper threads while the main thread sets it.
std::atomic<int> g_message_rank{-1};
}  // namespace

void set_message_rank(int rank) {
  g_message_rank.store(rank, std::memory_order_relaxed);
}

int message_rank() {
  return g_message_rank.load(std::memory_order_relaxed);
}

namespace detail {

void throw_gpu_error(const char* call, const std::string& what, const char* file, int line,
                     const std::string& site) {
  std::ostringstream os;
  os << call << " failed";
  if (!site.empty()) os << " at site '" << site << "'";
  os << ": " << what << " at " << file << ':' << line << " on rank ";
  const int r = message_rank();
  if (r >= 0)
    os << r;
  else
    os << '?';
  throw Error(os.str());
}

std::string cuda_error_text(cudaError_t e) {
  // Reading the error clears it unless it is sticky (a kernel fault); a sticky error will
  // surface again on the next call, which is what we want.
  std::ostringstream os;
  os << cudaGetErrorString(e) << " (" << cudaGetErrorName(e) << ", code " << static_cast<int>(e)
     << ")";
  return os.str();
}

std::string cublas_error_text(cublasStatus_t s) {
  std::ostringstream os;
  os << cublasGetStatusString(s) << " (" << cublasGetStatusName(s) << ", code "
     << static_cast<int>(s) << ")";
  return os.str();
}

std::string nccl_error_text(ncclResult_t r) {
  std::ostringstream os;
  os << ncclGetErrorString(r) << " (code " << static_cast<int>(r) << ")";
  // NCCL keeps a more specific message (which peer, which transport) for the last error.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') os << ": " << last;
  return os.str();
}

}  // namespace detail
}  // namespace gdn
