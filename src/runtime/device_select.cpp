#include "runtime/device_select.h"

#include <cuda_runtime.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "core/error.h"
#include "runtime/cuda_check.h"

namespace gdn {

namespace {

void check_mpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw_error(call, " failed in device selection (MPI error code ", rc, ")");
}

// The integer in environment variable `name` if it is one and lies in [0, size); else -1.
int env_local_rank(const char* name, int size) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return -1;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v >= size) return -1;
  return static_cast<int>(v);
}

// The ranks of world that share this node's memory, ordered by world rank. Caller frees.
MPI_Comm node_comm(MPI_Comm world) {
  int wr = 0;
  check_mpi(MPI_Comm_rank(world, &wr), "MPI_Comm_rank");
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, wr, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
  return node;
}

LocalRank local_rank_in(MPI_Comm node) {
  LocalRank lr;
  check_mpi(MPI_Comm_rank(node, &lr.rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(node, &lr.size), "MPI_Comm_size");
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const int r = env_local_rank(name, lr.size);
    if (r >= 0) {
      lr.rank = r;
      break;
    }
  }
  return lr;
}

}  // namespace

int visible_gpu_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = detail::cuda_error_text(e);
    cudaGetLastError();  // clear it so the next CUDA call does not report it again
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount returned 0 devices";
  return n;
}

LocalRank node_local_rank(MPI_Comm world) {
  MPI_Comm node = node_comm(world);
  LocalRank lr;
  try {
    lr = local_rank_in(node);
  } catch (...) {
    MPI_Comm_free(&node);
    throw;
  }
  MPI_Comm_free(&node);
  return lr;
}

std::string current_gpu_name() {
  int device = 0;
  GDN_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  GDN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

GpuChoice choose_gpu(MPI_Comm world) {
  GpuChoice g;
  std::string why;
  g.visible = visible_gpu_count(&why);
  int wr = 0;
  check_mpi(MPI_Comm_rank(world, &wr), "MPI_Comm_rank");
  // Agree before throwing: a rank that threw alone would leave the others in a collective.
  int fewest = g.visible;
  check_mpi(MPI_Allreduce(&g.visible, &fewest, 1, MPI_INT, MPI_MIN, world), "MPI_Allreduce");
  if (fewest == 0) {
    if (g.visible == 0)
      throw_error("no GPU visible on rank ", wr, " (", why,
                  "): the CUDA path needs one GPU per process; use --device cpu");
    throw_error("no GPU visible on some other rank (rank ", wr, " sees ", g.visible,
                "): the CUDA path needs a GPU on every rank; use --device cpu");
  }

  MPI_Comm node = node_comm(world);
  // {shared, failed}: every rank reaches the collectives below even if its CUDA calls
  // failed, so a local failure becomes an error on all ranks instead of a hang.
  int flags[2] = {0, 0};
  std::exception_ptr err;
  cudaDeviceProp prop{};
  try {
    g.local = local_rank_in(node);
    g.device = g.local.rank % g.visible;
    GDN_CUDA_CHECK(cudaSetDevice(g.device));
    GDN_CUDA_CHECK(cudaGetDeviceProperties(&prop, g.device));
  } catch (...) {
    err = std::current_exception();
    flags[1] = 1;
  }
  // Ranks share a GPU when their chosen devices have the same UUID; comparing device
  // numbers would be wrong when each rank has its own CUDA_VISIBLE_DEVICES.
  int me = 0, n = 1;
  MPI_Comm_rank(node, &me);
  MPI_Comm_size(node, &n);
  std::vector<cudaUUID_t> uuids(static_cast<std::size_t>(n));
  const int rc = MPI_Allgather(&prop.uuid, sizeof(cudaUUID_t), MPI_BYTE, uuids.data(),
                               sizeof(cudaUUID_t), MPI_BYTE, node);
  MPI_Comm_free(&node);
  check_mpi(rc, "MPI_Allgather");
  if (!flags[1])
    for (int q = 0; q < n; ++q)
      if (q != me && std::memcmp(&uuids[q], &prop.uuid, sizeof(cudaUUID_t)) == 0) flags[0] = 1;
  int agreed[2] = {0, 0};
  check_mpi(MPI_Allreduce(flags, agreed, 2, MPI_INT, MPI_MAX, world), "MPI_Allreduce");
  if (err) std::rethrow_exception(err);
  if (agreed[1])
    throw_error("choose_gpu: selecting a GPU failed on another rank (rank ", wr, " is fine)");
  g.shared = agreed[0] != 0;
  return g;
}

}  // namespace gdn
