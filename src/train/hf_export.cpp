#include "train/hf_export.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/call_sites.h"
#include "core/atomic_file.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "model/hf_weights.h"

namespace gdn {

std::vector<std::vector<std::size_t>> hf_export_files(const std::vector<std::int64_t>& tensor_bytes,
                                                      std::int64_t max_bytes) {
  std::vector<std::vector<std::size_t>> files(1);
  std::int64_t in_file = 0;
  for (std::size_t t = 0; t < tensor_bytes.size(); ++t) {
    if (!files.back().empty() && in_file + tensor_bytes[t] > max_bytes) {
      files.emplace_back();
      in_file = 0;
    }
    files.back().push_back(t);
    in_file += tensor_bytes[t];
  }
  return files;
}

namespace {

// The values of one file as `dtype`'s bytes (f32, f64 or bf16), little-endian.
template <typename T>
std::vector<char> file_bytes(const std::vector<T>& data, DType dtype) {
  std::vector<char> out(data.size() * dtype_size(dtype));
  auto fill = [&](auto tag, auto convert) {
    using E = decltype(tag);
    E* dst = reinterpret_cast<E*>(out.data());
    for (std::size_t i = 0; i < data.size(); ++i) dst[i] = convert(data[i]);
  };
  if (dtype == DType::bf16)
    fill(Bf16{}, [](T x) { return to_bf16(float(x)); });
  else if (dtype == DType::f32)
    fill(float{}, [](T x) { return float(x); });
  else
    fill(double{}, [](T x) { return double(x); });
  return out;
}

SafetensorsDtype safetensors_dtype(DType t) {
  return t == DType::bf16  ? SafetensorsDtype::BF16
         : t == DType::f32 ? SafetensorsDtype::F32
                           : SafetensorsDtype::F64;
}

const char* torch_dtype_name(DType t) {
  return t == DType::bf16 ? "bfloat16" : t == DType::f32 ? "float32" : "float64";
}

}  // namespace

template <typename T>
void write_hf_export(Communicator& comm, const std::string& dir, const ModelConfig& c,
                     const std::vector<ParamInfo>& whole, const std::vector<GlobalRun>& runs,
                     const T* values, std::int64_t max_bytes, DType file_dtype) {
  GDN_CHECK(max_bytes > 0, "--export-hf: the file size limit is ", max_bytes, " bytes");
  GDN_CHECK(file_dtype == DType::f32 || file_dtype == DType::f64 || file_dtype == DType::bf16,
            "--export-dtype ", dtype_name(file_dtype), ": expected f32, f64 or bf16");
  const std::int64_t es = std::int64_t(dtype_size(file_dtype));
  ModelConfig text = c;  // the text model only, under "model."
  text.multimodal = false;
  const bool root = comm.rank() == 0;
  if (root) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    GDN_CHECK(!ec, "--export-hf: cannot create directory '", dir, "': ", ec.message());
    nlohmann::json config = to_json(text);
    config["dtype"] = torch_dtype_name(file_dtype);
    (void)write_file_atomically(dir + "/config.json", config.dump(2) + "\n", "--export-hf");
  }
  const std::vector<HfTensorMap> maps = hf_tensor_maps(text, whole, false);
  std::vector<std::int64_t> bytes;
  for (const HfTensorMap& m : maps) bytes.push_back(numel(m.shape) * es);
  const std::vector<std::vector<std::size_t>> files = hf_export_files(bytes, max_bytes);
  const std::size_t n_files = files.size();
  auto file_name = [&](std::size_t f) {
    if (n_files == 1) return std::string("model.safetensors");
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", f + 1, n_files);
    return std::string(buf);
  };
  nlohmann::json weight_map = nlohmann::json::object();
  std::int64_t total = 0;
  for (std::size_t f = 0; f < n_files; ++f) {
    // This file's tensors back to back; each rank's elements of them, by where they go.
    std::vector<std::int64_t> base;
    std::int64_t size = 0;
    for (std::size_t t : files[f]) base.push_back(size), size += numel(maps[t].shape);
    std::vector<GlobalRun> mine;
    for (std::size_t i = 0; i < files[f].size(); ++i)
      for (const HfRun& h : maps[files[f][i]].runs)
        for (const GlobalRun& r : runs) {
          const std::int64_t lo = std::max(h.param, r.global);
          const std::int64_t hi = std::min(h.param + h.len, r.global + r.n);
          if (lo < hi)
            mine.push_back({base[i] + h.hf + (lo - h.param), r.at + (lo - r.global), hi - lo});
        }
    const std::vector<T> data =
        gather_runs<T>(comm, mine, {values}, size, train_sites::kExportGather)[0];
    if (!root) continue;
    const std::vector<char> stored = file_bytes(data, file_dtype);
    std::vector<SafetensorsTensor> tensors;
    for (std::size_t i = 0; i < files[f].size(); ++i) {
      const HfTensorMap& m = maps[files[f][i]];
      tensors.emplace_back(m.name, safetensors_dtype(file_dtype), m.shape,
                           stored.data() + base[i] * es);
      weight_map[m.name] = file_name(f);
    }
    write_safetensors(dir + "/" + file_name(f), tensors, {{"format", "pt"}});
    total += size * es;
  }
  if (root && n_files > 1) {
    const nlohmann::json index{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    (void)write_file_atomically(dir + "/model.safetensors.index.json", index.dump(2) + "\n",
                                "--export-hf");
  }
}

template void write_hf_export<float>(Communicator&, const std::string&, const ModelConfig&,
                                     const std::vector<ParamInfo>&, const std::vector<GlobalRun>&,
                                     const float*, std::int64_t, DType);
template void write_hf_export<double>(Communicator&, const std::string&, const ModelConfig&,
                                      const std::vector<ParamInfo>&, const std::vector<GlobalRun>&,
                                      const double*, std::int64_t, DType);

}  // namespace gdn
