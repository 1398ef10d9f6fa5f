#include "common/chip_datasheet.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace medprof::roofline {
namespace {

constexpr double kT = 1e12;  // TFLOP/s, TB/s

struct Entry {
  std::vector<const char*> name_has;  // every one must be in the device name (case-insensitive)
  std::vector<const char*> name_lacks;
  ChipDatasheet sheet;
};

// A100: the same compute for SXM4 and PCIe; DRAM by memory size and form factor.
std::map<std::string, double> A100(double dram) {
  return {{"dram", dram},           {"fp64", 9.7 * kT},        {"fp32", 19.5 * kT},
          {"fp16", 78 * kT},        {"bf16", 39 * kT},         {"tensor_tf32", 156 * kT},
          {"tensor_fp16", 312 * kT}, {"tensor_bf16", 312 * kT}};
}

// V100: CUDA-core FP16 is twice FP32; no TF32, BF16 or FP8.
std::map<std::string, double> V100(double fp64, double fp32, double tensor, double dram) {
  return {{"dram", dram}, {"fp64", fp64}, {"fp32", fp32}, {"fp16", 2 * fp32}, {"tensor_fp16", tensor}};
}

// Dense peaks at boost clock as NVIDIA publishes them. Sparsity doubles the Tensor Core figures on
// the datasheets of A100 and later; the halves are given here (the workload is dense).
const std::vector<Entry>& Table() {
  static const std::vector<Entry> kTable = {
      // NVIDIA H200 Tensor Core GPU datasheet (H200 SXM): compute as H100 SXM, 4.8 TB/s HBM3e.
      {{"H200"},
       {"NVL"},
       {"H200 SXM",
        "NVIDIA H200 datasheet (SXM; Tensor Core figures halved from the sparse ones); CUDA-core FP16/BF16 as H100 SXM5",
        {{"dram", 4.8 * kT},
         {"fp64", 34 * kT},
         {"fp32", 67 * kT},
         {"fp16", 133.8 * kT},
         {"bf16", 133.8 * kT},
         {"tensor_tf32", 494.7 * kT},
         {"tensor_fp16", 989.4 * kT},
         {"tensor_bf16", 989.4 * kT},
         {"tensor_fp8", 1978.9 * kT}}}},
      {{"H200", "NVL"},
       {},
       {"H200 NVL",
        "NVIDIA H200 datasheet (NVL; Tensor Core figures halved from the sparse ones)",
        {{"dram", 4.8 * kT},
         {"fp64", 30 * kT},
         {"fp32", 60 * kT},
         {"tensor_tf32", 417.5 * kT},
         {"tensor_fp16", 835.5 * kT},
         {"tensor_bf16", 835.5 * kT},
         {"tensor_fp8", 1670.5 * kT}}}},
      // NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5, PCIe) and H100 datasheet (NVL).
      {{"H100", "PCIe"},
       {},
       {"H100 PCIe",
        "NVIDIA H100 whitepaper, H100 PCIe",
        {{"dram", 2.0 * kT},
         {"fp64", 25.6 * kT},
         {"fp32", 51.2 * kT},
         {"fp16", 102.4 * kT},
         {"bf16", 102.4 * kT},
         {"tensor_tf32", 378 * kT},
         {"tensor_fp16", 756 * kT},
         {"tensor_bf16", 756 * kT},
         {"tensor_fp8", 1513 * kT}}}},
      {{"H100", "NVL"},
       {},
       {"H100 NVL",
        "NVIDIA H100 datasheet (NVL; Tensor Core figures halved from the sparse ones)",
        {{"dram", 3.9 * kT},
         {"fp64", 30 * kT},
         {"fp32", 60 * kT},
         {"tensor_tf32", 417.5 * kT},
         {"tensor_fp16", 835.5 * kT},
         {"tensor_bf16", 835.5 * kT},
         {"tensor_fp8", 1670.5 * kT}}}},
      {{"H100"},
       {"PCIe", "NVL"},
       {"H100 SXM5",
        "NVIDIA H100 whitepaper, H100 SXM5 (80 GB HBM3)",
        {{"dram", 3.35 * kT},
         {"fp64", 33.5 * kT},
         {"fp32", 66.9 * kT},
         {"fp16", 133.8 * kT},
         {"bf16", 133.8 * kT},
         {"tensor_tf32", 494.7 * kT},
         {"tensor_fp16", 989.4 * kT},
         {"tensor_bf16", 989.4 * kT},
         {"tensor_fp8", 1978.9 * kT}}}},
      // NVIDIA A100 Tensor Core GPU Architecture whitepaper and A100 datasheet.
      {{"A100", "80GB", "PCIe"}, {}, {"A100 PCIe 80GB", "NVIDIA A100 datasheet", A100(1.935 * kT)}},
      {{"A100", "80GB"}, {"PCIe"}, {"A100 SXM4 80GB", "NVIDIA A100 datasheet", A100(2.039 * kT)}},
      {{"A100"}, {"80GB"}, {"A100 40GB", "NVIDIA A100 whitepaper and datasheet", A100(1.555 * kT)}},
      // NVIDIA Tesla V100 datasheet (SXM2, PCIe) and V100S datasheet.
      {{"V100S"}, {}, {"V100S PCIe", "NVIDIA V100S datasheet", V100(8.2 * kT, 16.4 * kT, 130 * kT, 1.134 * kT)}},
      {{"V100", "PCIE"}, {"V100S"}, {"V100 PCIe", "NVIDIA Tesla V100 datasheet, PCIe", V100(7 * kT, 14 * kT, 112 * kT, 0.9 * kT)}},
      {{"V100"}, {"PCIE", "V100S"}, {"V100 SXM2", "NVIDIA Tesla V100 datasheet, SXM2", V100(7.8 * kT, 15.7 * kT, 125 * kT, 0.9 * kT)}},
  };
  return kTable;
}

bool Matches(const Entry& e, std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  const auto has = [&](const char* s) { return absl::StrContains(lower, absl::AsciiStrToLower(s)); };
  for (const char* s : e.name_has) {
    if (!has(s)) return false;
  }
  for (const char* s : e.name_lacks) {
    if (has(s)) return false;
  }
  return true;
}

}  // namespace

const ChipDatasheet* FindDatasheet(std::string_view cuda_device_name) {
  for (const Entry& e : Table()) {
    if (Matches(e, cuda_device_name)) return &e.sheet;
  }
  return nullptr;
}

bool FillDatasheet(std::string_view cuda_device_name, v1::Ceilings* ceilings) {
  const ChipDatasheet* sheet = FindDatasheet(cuda_device_name);
  if (sheet == nullptr) return false;
  for (const auto& [name, peak] : sheet->peaks) {
    v1::Ceiling* target = nullptr;
    for (v1::Ceiling& c : *ceilings->mutable_ceilings()) {
      if (c.name() == name) target = &c;
    }
    if (target == nullptr) {
      target = ceilings->add_ceilings();
      target->set_name(name);
    }
    target->set_datasheet(peak);
  }
  return true;
}

}  // namespace medprof::roofline
