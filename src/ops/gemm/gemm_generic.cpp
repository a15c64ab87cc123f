// The GEMM kernels of a build for a CPU other than x86-64: the compiler's own flags, bf16
// operands widened on load (bgemm_widened).
#include "ops/gemm/register_gemm.h"

namespace gdn::la {

extern const GemmKernels kGemmGeneric = GDN_GEMM_KERNELS(bgemm_widened);

}  // namespace gdn::la
