// The GEMM kernels for AVX2 + FMA, 16 vector registers: tiles of 6 rows. Compiled with this ISA's
// flags (src/ops/CMakeLists.txt); bf16 operands are widened on load (bgemm_widened).
#include "ops/gemm/register_gemm.h"

namespace gdn::la {

extern const GemmKernels kGemmAvx2 = GDN_GEMM_KERNELS(bgemm_widened);

}  // namespace gdn::la
