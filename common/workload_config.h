// The Med-DDPM job configuration rules shared by server, worker and CLI: presets, defaults,
// and validation with messages a person can act on.
//
// A WorkloadConfig travels from the CLI through the server and the agent to the worker. The
// server calls ApplyDefaults then Validate before queueing; the worker does the same for
// hand-made configurations. Every refusal is INVALID_ARGUMENT and names the field, the value
// and the allowed range, e.g. "volume: 4096 is out of range (allowed 8..512, a multiple of 16)".
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/request_limits.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::config {

// Flags a preset stands for (DESIGN.md, "Presets").
struct PresetFlags {
  bool tf32 = false;           // TF32 for cuDNN and cuBLAS (off = strict FP32, set explicitly)
  bool channels_last = false;  // NDHWC (ChannelsLast3d) for weights and activations
  bool bf16 = false;           // bf16 autocast with FP32 master weights
  bool fused = false;          // medprof's fused GroupNorm(+SiLU) kernels where available
};

// baseline, opt1, opt2, opt12, bf16, opt3 — in this order.
const std::vector<std::string>& PresetNames();
// "baseline|opt1|opt2|opt12|bf16|opt3"
std::string PresetList();
absl::StatusOr<PresetFlags> PresetFor(std::string_view name);

// Defaults and ranges of every field: common/request_limits.h.

// Fills every unset field with its default. Explicitly set fields are left alone (so an
// explicit volume 0 is still refused by Validate). Does not validate.
void ApplyDefaults(v1::WorkloadConfig* config);

// Checks every field of a config after ApplyDefaults. Returns the first violation.
absl::Status Validate(const v1::WorkloadConfig& config);

// The preset's flags with the config's explicit overrides applied.
PresetFlags EffectiveFlags(const v1::WorkloadConfig& config);

// Volume (D, H, W) after defaults.
struct Dims { int d = 0, h = 0, w = 0; };
Dims VolumeDims(const v1::WorkloadConfig& config);

// Phase name as used on the command line and in tables: forward | train | sample.
std::string PhaseName(v1::Phase phase);
absl::StatusOr<v1::Phase> ParsePhase(std::string_view text);

}  // namespace medprof::config
