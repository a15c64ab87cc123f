// The first test to read: one training step of gdn-cp against transformers, the way
// llm.c's test_gpt2.c checks its step against PyTorch.
//
// scripts/make_hf_fixtures.py had transformers build four tiny models with random weights
// and run one forward and backward in float64; each left tests/fixtures/hf/<name>/:
//   config.json, model.safetensors   the checkpoint, as save_pretrained wrote it
//   tokens.npy                       [B, T + 1]: inputs [:, :-1], targets [:, 1:]
//   cu_seqlens.npy                   (qwen3_next_packed only) the documents of every row
//   expected.json                    the loss, the MoE load-balancing loss, their total
//   grads/<tensor>.npy               d total / d tensor, in the checkpoint's layout
// Here the library alone (no app code) reads that checkpoint (model/hf_weights.h), builds
// the model in double on one rank (Host), runs one forward_backward and checks the loss
// terms within 1e-12 relative and every gradient tensor, by its checkpoint name, within
// 1e-9 relative L2: the tolerances of tests/cli/test_hf.sh, which checks the same through
// gdn_eval under context parallelism. A failing tensor is named with its worst element.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <set>

#include "comm/single_communicator.h"
#include "core/json_reader.h"
#include "core/npy.h"
#include "cp/documents.h"
#include "model/hf_weights.h"
#include "model/model.h"

using namespace gdn;

namespace {

const std::string kFixtures = GDN_SOURCE_DIR "/tests/fixtures/hf/";

// |got - want| <= tol |want|.
bool rel_close(double got, double want, double tol) {
  return std::abs(got - want) <= tol * std::abs(want);
}

// Checks one gradient tensor against transformers' (||got - want|| / ||want|| <= tol, as
// gdn_npy_diff): on failure, names it with its worst element.
void check_tensor(const std::string& name, const std::vector<double>& got,
                  const Tensor<double>& want, double tol) {
  REQUIRE(got.size() == want.data.size());
  double diff2 = 0, want2 = 0, worst = -1;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(got[i] - want.data[i]);
    diff2 += d * d;
    want2 += want.data[i] * want.data[i];
    if (d > worst || (std::isnan(d) && !std::isnan(worst))) worst = d, at = i;  // NaN: worst
  }
  const double rel = want2 > 0 ? std::sqrt(diff2 / want2) : (diff2 > 0 ? INFINITY : 0.0);
  INFO(std::setprecision(17) << name << " " << shape_str(want.shape) << ": rel_l2 " << rel
                             << " (tol " << tol << "); worst element [" << at << "] = " << got[at]
                             << ", transformers " << want.data[at]);
  CHECK(rel <= tol);
}

}  // namespace

TEST_CASE("one step matches transformers: loss terms and every gradient (fp64, 1 rank)",
          "[hf][parity]") {
  const std::string name = GENERATE(as<std::string>{}, "qwen3_5_dense", "qwen3_5_moe",
                                    "qwen3_next_moe", "qwen3_next_packed");
  const std::string dir = kFixtures + name;
  INFO("fixture " << dir);

  // The model: config.json, then the checkpoint's weights in the model's flat order.
  ModelConfig c = parse_model_config(read_json_file(dir + "/config.json"), dir);
  tie_head_from_checkpoint(dir, c);  // untied when lm_head.weight differs, as transformers
  const std::vector<ParamInfo> infos = parameter_infos(c);
  std::vector<double> weights(std::size_t(infos.back().offset + infos.back().size));
  std::vector<std::string> skipped;  // mtp.*, the vision tower
  read_hf_weights(dir, c, infos, weights, skipped);
  Model<double, Host> model(c, 16);
  model.params().set_values(weights);

  // The batch: inputs and next-token targets; packed documents where the fixture has them
  // (the target after a document's last token is then not counted).
  const Tensor<std::int64_t> rows = read_npy_as<std::int64_t>(dir + "/tokens.npy");
  const int B = int(rows.shape[0]);
  const std::int64_t T = rows.shape[1] - 1;
  std::vector<std::int32_t> tokens, targets;
  for (int b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t) {
      tokens.push_back(std::int32_t(rows.data[std::size_t(b * (T + 1) + t)]));
      targets.push_back(std::int32_t(rows.data[std::size_t(b * (T + 1) + t + 1)]));
    }
  SingleCommunicator comm;
  model.set_comms(ModelComms::single(comm));
  StepShard cp = StepShard::contiguous(T);
  Documents docs = Documents::whole(B, T);
  if (std::filesystem::exists(dir + "/cu_seqlens.npy")) {
    const std::vector<std::int64_t> cu = read_npy_as<std::int64_t>(dir + "/cu_seqlens.npy").data;
    docs = Documents(std::vector<std::vector<std::int64_t>>(std::size_t(B), cu), T);
    cp.documents = &docs;
    docs.mask_targets(cp.shard, targets.data());
  }
  const std::int64_t counted = B * T - docs.ignored_targets();

  // One forward and backward of total = mean cross-entropy (+ coef * load-balancing loss).
  model.params().zero_grad();
  const auto losses =
      model.forward_backward(cp, tokens.data(), targets.data(), B, 1.0 / double(counted));
  const double loss = losses.ce_sum / double(counted);
  const double total = loss + (c.output_router_logits ? c.router_aux_loss_coef * losses.aux : 0);

  const nlohmann::json want = read_json_file(dir + "/expected.json");
  CHECK(counted == want["tokens"].get<std::int64_t>());
  {
    const double want_loss = want["loss"], want_aux = want["aux_loss"], want_total = want["total"];
    INFO(std::setprecision(17) << "loss " << loss << " vs " << want_loss << ", aux_loss "
                               << losses.aux << " vs " << want_aux << ", total " << total << " vs "
                               << want_total);
    CHECK(rel_close(loss, want_loss, 1e-12));
    CHECK(rel_close(losses.aux, want_aux, 1e-12));
    CHECK(rel_close(total, want_total, 1e-12));
  }

  // Every tensor transformers has a gradient for, by name, and nothing else.
  const std::vector<double> grads = model.params().host_grads();
  std::set<std::string> expected_names, ours;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/grads"))
    expected_names.insert(e.path().stem().string());
  for (const HfTensorMap& m : hf_tensor_maps(c, infos)) {
    ours.insert(m.name);
    const std::string file = dir + "/grads/" + m.name + ".npy";
    if (!std::filesystem::exists(file)) continue;  // reported by the name check below
    const Tensor<double> ref = read_npy_as<double>(file);
    REQUIRE(ref.shape == m.shape);
    check_tensor(m.name, gather_hf(m, grads.data()), ref, 1e-9);
  }
  CHECK(ours == expected_names);
}
