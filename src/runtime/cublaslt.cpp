#include "runtime/cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/error.h"
#include "runtime/cuda_check.h"

namespace gdn {

namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;

// The largest power of two (at most 256) dividing p's address: what the heuristic may
// assume of the operand (an expert's or a slice's rows need not start on 256 bytes).
std::uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// What a plan depends on: the shape, the transposes, accumulate or not, the alignments.
using Key = std::tuple<int, int, int, int, int, int, int, int, bool, std::uint32_t, std::uint32_t,
                       std::uint32_t>;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// One thread's cuBLASLt state on one device. Destroyed at the thread's end without
// checks (no throw from a destructor; at process exit the runtime may be gone already).
class Lt {
 public:
  Lt() {
    GDN_CUBLAS_CHECK(cublasLtCreate(&handle_));
    GDN_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  }
  ~Lt() {
    for (auto& [key, p] : plans_) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.c);
      cublasLtMatmulDescDestroy(p.desc);
    }
    cudaFree(workspace_);
    cublasLtDestroy(handle_);
  }
  Lt(const Lt&) = delete;
  Lt& operator=(const Lt&) = delete;

  void matmul(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const Bf16* A,
              int lda, const Bf16* B, int ldb, float beta, float* C, int ldc) {
    const Plan& p = plan({int(ta), int(tb), m, n, k, lda, ldb, ldc, beta != 0.0f, alignment(A),
                          alignment(B), alignment(C)});
    const float alpha = 1.0f;
    GDN_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, A, p.a, B, p.b, &beta, C, p.c, C, p.c,
                                    &p.algo, workspace_, kWorkspaceBytes, /*stream=*/0));
  }

 private:
  const Plan& plan(const Key& key) {
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    const auto [ta, tb, m, n, k, lda, ldb, ldc, acc, align_a, align_b, align_c] = key;
    Plan p;
    const auto opa = cublasOperation_t(ta), opb = cublasOperation_t(tb);
    GDN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    GDN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    GDN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    // The stored matrices: op(A) is m x k, op(B) k x n.
    const bool na = opa == CUBLAS_OP_N, nb = opb == CUBLAS_OP_N;
    GDN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, na ? m : k, na ? k : m, lda));
    GDN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, nb ? k : n, nb ? n : k, ldb));
    GDN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, m, n, ldc));
    cublasLtMatmulPreference_t pref = nullptr;
    GDN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                         sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                         sizeof align_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                         sizeof align_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                         sizeof align_c);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                         sizeof align_c);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c,
                                                             pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.c);
      cublasLtMatmulDescDestroy(p.desc);
      throw_error("cuBLASLt has no bf16 algorithm for the GEMM m ", m, ", n ", n, ", k ", k,
                  " (op(A) ", na ? "N" : "T", ", op(B) ", nb ? "N" : "T", ", lda ", lda, ", ldb ",
                  ldb, ", ldc ", ldc, ", alignments ", align_a, "/", align_b, "/", align_c,
                  " bytes): ", detail::cublas_error_text(st));
    }
    p.algo = result.algo;
    return plans_.emplace(key, p).first->second;
  }

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, Plan> plans_;
};

}  // namespace

void lt_matmul_bf16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const Bf16* A,
                    int lda, const Bf16* B, int ldb, float beta, float* C, int ldc) {
  GDN_CHECK(m > 0 && n > 0 && k > 0, "lt_matmul_bf16: m ", m, ", n ", n, ", k ", k,
            " (each must be > 0)");
  thread_local std::map<int, Lt> per_device;
  int device = 0;
  GDN_CUDA_CHECK(cudaGetDevice(&device));
  per_device.try_emplace(device).first->second.matmul(ta, tb, m, n, k, A, lda, B, ldb, beta, C,
                                                      ldc);
}

}  // namespace gdn
