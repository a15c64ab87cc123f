#include "common/deprecated_env.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "train/run_layout.h"

namespace gdn::app {

void take_deprecated_env(TrainConfig& t, std::vector<std::string>& warnings) {
  struct Old {
    const char* var;
    const char* key;
  };
  // Gone: a value it held would no longer mean what it did (cudnn came), so it is refused.
  if (const char* gone = std::getenv("GDN_CUDA_ATTENTION"); gone && *gone)
    throw_error("GDN_CUDA_ATTENTION=", gone, " is gone: use --attention-backend auto | cudnn | ",
                "flash | exact (train.attention_backend)");
  for (const Old& o : {Old{"GDN_GEMM_PATH", "gemm_path"}, Old{"GDN_CUDA_WALK", "cuda_walk"},
                       Old{"GDN_CUDA_TF32", "cuda_tf32"}}) {
    const char* value = std::getenv(o.var);
    if (!value || !*value) continue;
    const TrainField& f = *find_train_field(o.key);
    const std::string flag = std::string("--") + f.flag;
    if (t.set_by.count(o.key)) {
      warnings.push_back(std::string(o.var) + " is ignored: train." + o.key + t.origin(o.key) +
                         " sets it; the variable is deprecated");
      continue;
    }
    std::string text = value;
    if (std::string(o.key) == "cuda_tf32") text = text == "1" ? "true" : "false";
    try {
      set_train_field_text(t, f, text);
    } catch (const Error& e) {
      throw_error(o.var, "=", value, ": ", e.what());
    }
    t.set_by[o.key] = o.var;
    warnings.push_back(std::string(o.var) + "=" + value + " is deprecated and goes in a later " +
                       "release: use " + flag + " or train." + o.key);
  }
}

void apply_deprecated_env() {
  TrainConfig t;
  std::vector<std::string> warnings;
  take_deprecated_env(t, warnings);
  for (const std::string& w : warnings) spdlog::warn("{}", w);
  resolve_layout(t, {}).apply();
}

}  // namespace gdn::app
