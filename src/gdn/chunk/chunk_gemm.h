// What a GPU Exec runs ChunkKernel's float GEMMs on (docs/design.md §2e, §2f): fp32 SIMT
// (exact to fp32), TF32 tensor cores (10 mantissa bits in, fp32 sums), or bf16 tensor cores
// (8 significant bits in, fp32 sums: the bf16 mode's). Host Execs ignore it.
#pragma once

namespace gdn {

enum class ChunkGemm { kFp32, kTf32, kBf16 };

}  // namespace gdn
