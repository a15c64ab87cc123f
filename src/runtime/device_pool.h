// Device memory for DeviceBuffer from CUDA's stream-ordered allocator (cudaMallocAsync /
// cudaFreeAsync on the legacy default stream, on which every kernel and copy of the Cuda
// policy runs), with the device's default memory pool told to keep what is freed (release
// threshold: unlimited). The model and the CP core make and drop their step buffers every
// step; from the second step on the pool serves them all, so a step does no cudaMalloc and
// no cudaFree (which also waits for the whole device), and memory is not handed back to the
// driver between steps. Plain C++ over the CUDA runtime; CUDA builds only.
#pragma once

#include <cstddef>

namespace gdn::cuda_detail {

// bytes > 0. Throws (GDN_CUDA_CHECK) when the device has no room left.
void* pool_alloc(std::size_t bytes);
// Stream-ordered: the memory is reused only by work queued after this call. Never throws.
void pool_free(void* p) noexcept;
// Bytes the pool holds from the driver (cudaMemPoolAttrReservedMemCurrent): flat from step
// to step once the first step has run (tests/gpu/test_cuda_model.cpp checks it).
std::size_t pool_reserved_bytes();
// The most bytes of the pool's buffers in use at once since the process began
// (cudaMemPoolAttrUsedMemHigh): the step's device buffers at their peak.
std::size_t pool_used_peak_bytes();

}  // namespace gdn::cuda_detail
