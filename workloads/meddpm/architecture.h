// The Med-DDPM U-Net's layout as plain data (no LibTorch): which blocks exist, at which level,
// with how many channels. The LibTorch module (unet.h) is built from this plan, and the
// parameter count, the per-block breakdown (spec/meddpm.md §3.1) and the memory estimate
// (§3.3) are computed from it without allocating anything — so the tests can check that the
// plan, the spec and the instantiated module agree.
//
// Layout (guided-diffusion UNetModel as configured by Med-DDPM, spec §1.2-1.3), names as in the
// PyTorch peer (peer/meddpm_eager.py) so that weights map one to one:
//   t   time MLP: Linear(base -> 4 base), SiLU, Linear(4 base -> 4 base)
//   I   input blocks: [conv_in], then per level: res_blocks x [ResBlock (+ Attention)],
//       then [Downsample] except after the last level
//   M   middle: ResBlock, Attention, ResBlock
//   O   output blocks: per level from the deepest: (res_blocks + 1) x [ResBlock on
//       concat(h, skip) (+ Attention)], the last one of a level (except level 0) + Upsample
//   f   head: GroupNorm, SiLU, Conv3d(base -> out)
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "workloads/meddpm/workload.h"

namespace medprof::meddpm {

enum class LayerKind {
  kInputConv,   // Conv3d k3 in -> base           (peer: D with u=0, stride 1)
  kResBlock,    // ResBlock(in -> out)            (peer: R)
  kAttention,   // AttentionBlock(in)             (peer: A)
  kDownsample,  // Conv3d k3 stride 2             (peer: D, stride 2)
  kUpsample,    // trilinear x2 + Conv3d k3       (peer: D with u=1)
};

struct Layer {
  LayerKind kind = LayerKind::kResBlock;
  int in_channels = 0;
  int out_channels = 0;
  int level = 0;  // resolution level the layer's INPUT lives at (0 = full volume)
};

// One entry of I or O: the layers applied in sequence to one tensor.
struct Block {
  std::vector<Layer> layers;
  int level = 0;          // level of the block's input
  int skip_channels = 0;  // O only: channels of the popped skip concatenated first
};

struct UNetPlan {
  ModelOptions model;
  int levels = 0;
  int time_embed_dim = 0;  // 4 * base_channels
  std::vector<Block> input_blocks;
  std::vector<Layer> middle;
  std::vector<Block> output_blocks;
  int head_channels = 0;
};

// INVALID_ARGUMENT (naming the field and the allowed range) when the model cannot be built:
// channels, multipliers, res_blocks, groups dividing every width (same rules and messages as
// config::Validate, common/workload_config.h).
absl::Status ValidateModel(const ModelOptions& model);

// The DDPM loop's part of `options` (workloads/ddpm/options.h); bf16 as requested (the workload
// replaces it with the effective choice).
ddpm::LoopOptions LoopOptionsOf(const WorkloadOptions& options);

// The plan of a valid model (call ValidateModel first).
UNetPlan MakePlan(const ModelOptions& model);

// Parameter counts (spec §3.1 formulas).
int64_t LayerParameters(const Layer& layer, int time_embed_dim);
int64_t TimeMlpParameters(const UNetPlan& plan);
int64_t HeadParameters(const UNetPlan& plan);

// Parameters grouped as in spec §3.1's breakdown: "time MLP", "input conv", "enc L0".., "middle",
// "dec L<n>".. (deepest first), "head". Encoder levels include their downsample, decoder levels
// their upsample.
struct ParameterGroup {
  std::string name;
  int64_t parameters = 0;
};
std::vector<ParameterGroup> ParameterBreakdown(const UNetPlan& plan);

// Memory estimate, spec §3.3, in bytes; see EstimatePeakMemoryBytes in workload.h.
struct MemoryEstimate {
  uint64_t state_bytes = 0;       // weights (+ grads, Adam m/v, EMA in training)
  uint64_t activation_bytes = 0;  // saved activations (train) or peak live activations
  uint64_t total_bytes = 0;
};
MemoryEstimate EstimateMemory(const WorkloadOptions& options);

}  // namespace medprof::meddpm
