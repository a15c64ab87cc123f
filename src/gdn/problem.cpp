#include "gdn/problem.h"

#include "core/error.h"

namespace gdn {

void GdnProblem::validate() const {
  GDN_CHECK(B >= 1 && T >= 0 && Hk >= 1 && Hv >= 1 && K >= 1 && V >= 1, "invalid GDN shape B=", B,
            " T=", T, " Hk=", Hk, " Hv=", Hv, " K=", K, " V=", V,
            ": expected B, Hk, Hv, K, V >= 1 and T >= 0");
  GDN_CHECK(Hv % Hk == 0, "value heads Hv=", Hv, " is not a multiple of key heads Hk=", Hk,
            ": each value head must read key head h / (Hv/Hk)");
  GDN_CHECK(chunk_size >= 16 && chunk_size <= 128 && (chunk_size & (chunk_size - 1)) == 0,
            "chunk_size=", chunk_size, " is not supported: expected a power of two in [16, 128]");
  GDN_CHECK(std::isfinite(scale), "scale=", scale, " must be finite");
  if (!cu_seqlens.empty()) {
    GDN_CHECK(B == 1, "cu_seqlens (packed sequences) needs batch size B=1, got B=", B);
    GDN_CHECK(cu_seqlens.size() >= 2, "cu_seqlens has ", cu_seqlens.size(),
              " entries: expected at least 2 ([0, ..., T])");
    GDN_CHECK(cu_seqlens.front() == 0, "cu_seqlens[0]=", cu_seqlens.front(), ": expected 0");
    // Equal neighbours are a zero-length sequence, as fla accepts: its final state is its h0.
    for (std::size_t i = 1; i < cu_seqlens.size(); ++i)
      GDN_CHECK(cu_seqlens[i] >= cu_seqlens[i - 1], "cu_seqlens decreases: cu[", i - 1,
                "]=", cu_seqlens[i - 1], ", cu[", i, "]=", cu_seqlens[i],
                ": expected non-decreasing boundaries");
    GDN_CHECK(cu_seqlens.back() == T, "cu_seqlens ends at ", cu_seqlens.back(),
              ": expected the sequence length T=", T);
  }
}

}  // namespace gdn
