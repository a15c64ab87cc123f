#include "train/run_layout.h"

#include "core/enum_names.h"
#include "core/error.h"

namespace gdn {

RunLayout resolve_layout(const TrainConfig& t, const PairScanChoice& scan) {
  RunLayout l;
  l.dtype = t.dtype;
  l.pair_scan = scan;
  l.recompute = t.recompute;
  l.shard = t.shard;
  l.gemm_path = t.gemm_path == "auto"
                    ? la::gemm_paths().back()
                    : la::gemm_path_named(t.gemm_path, "train.gemm_path" + t.origin("gemm_path"));
  l.cuda_walk = t.cuda_walk;
  l.cuda_tf32 = t.cuda_tf32;
  l.attention_backend = t.attention_backend;
  return l;
}

std::string RunLayout::describe() const {
  return std::string(dtype_name(dtype)) + ", pair_scan " + name_of(pair_scan.scan) +
         (pair_scan.why.empty() ? "" : " (" + pair_scan.why + ")") + ", recompute " +
         name_of(recompute) + ", shard " + name_of(shard) + ", gemm " +
         la::gemm_path_name(gemm_path) + ", cuda_walk " + name_of(cuda_walk) + ", cuda_tf32 " +
         (cuda_tf32 ? "on" : "off") + ", attention " + name_of(attention_backend);
}

nlohmann::json RunLayout::to_json() const {
  return {{"dtype", dtype_name(dtype)},
          {"pair_scan", name_of(pair_scan.scan)},
          {"recompute", name_of(recompute)},
          {"shard", name_of(shard)},
          {"gemm_path", la::gemm_path_name(gemm_path)},
          {"cuda_walk", name_of(cuda_walk)},
          {"cuda_tf32", cuda_tf32},
          {"attention_backend", name_of(attention_backend)}};
}

void RunLayout::apply() const {
  la::set_gemm_path(gemm_path);
  pass::set_cuda_walk(cuda_walk);
  pass::set_cuda_tf32(cuda_tf32);
  ops::set_attention_backend(attention_backend);
}

}  // namespace gdn
