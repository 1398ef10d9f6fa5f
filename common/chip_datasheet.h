// ChipDatasheet: the vendor's peak rates per GPU model — DRAM bandwidth and the dense (no
// sparsity) FLOP/s of the CUDA cores (FP32, FP16, BF16, FP64) and Tensor Cores (TF32, FP16, BF16,
// FP8) — defined once, for the roofline's dashed ceilings (workload.proto Ceiling.datasheet) beside
// the rates the worker measures on the node. Sources and rounding are in chip_datasheet.cc.
//
// Models are matched on the CUDA device name (cudaDeviceProp::name, e.g. "NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-32GB"); form factors with different peaks (SXM, PCIe,
// NVL) are separate entries. A name matching no entry has no datasheet (nullptr), never a guess.
//
// Pure data; thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "medprof/v1/workload.pb.h"

namespace medprof::roofline {

struct ChipDatasheet {
  std::string model;   // "H100 SXM5"
  std::string source;  // where the numbers come from
  // Ceiling name (workload.proto Ceiling.name) -> peak per second (bytes/s or FLOP/s). A name the
  // chip lacks (tensor_fp8 before Hopper, tf32/bf16 on V100) or the source does not give is absent.
  std::map<std::string, double> peaks;
};

// The datasheet of the GPU named `cuda_device_name`, or nullptr.
const ChipDatasheet* FindDatasheet(std::string_view cuda_device_name);

// Sets Ceiling.datasheet of `ceilings` from the datasheet of `cuda_device_name`: existing ceilings
// by name, and a new ceiling (measured 0) for each peak not yet there. Returns false, leaving
// `ceilings` as it is, when there is no datasheet for the name.
bool FillDatasheet(std::string_view cuda_device_name, v1::Ceilings* ceilings);

}  // namespace medprof::roofline
