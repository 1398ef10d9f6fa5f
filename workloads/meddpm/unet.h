// The Med-DDPM 3D U-Net as a LibTorch module (spec/meddpm.md §1), built from an
// architecture.h plan.
//
// Submodules and parameters are registered in the order and under the names of the PyTorch
// peer (peer/meddpm_eager.py, class Net): t (time MLP: t.0, t.2), I (input blocks), M (middle),
// O (output blocks), f (head: f.0 GroupNorm, f.2 conv); a ResBlock R has a (a.0 GN, a.2 conv),
// e (Linear), b (b.0 GN, b.2 conv), k (1x1x1 skip conv, only when Cin != Cout); an attention
// block A has n (GN), q (qkv conv1d), p (proj conv1d); a conv layer D (input conv, downsample,
// upsample) has c. So named_parameters() lists exactly the peer's state_dict keys, in order.
//
// Numerics: GroupNorm(groups, eps 1e-5) always runs in FP32 (its input is cast up under
// autocast); attention softmax runs in FP32; SiLU everywhere; the timestep sinusoid has
// max_period 1000, cos before sin, raw integer t, and is written into one tensor without
// aten::cat, so a forward issues exactly the spec's 57 conv3d / 39 group_norm / 10 cat (at the
// default widths and levels).
//
// Not thread-safe (a torch::nn::Module). Exceptions: LibTorch's (c10::Error) — callers at the
// workload border convert them to Status.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/meddpm/architecture.h"

namespace medprof::meddpm {

inline constexpr double kGroupNormEps = 1e-5;
inline constexpr double kMaxPeriod = 1000.0;

// sinusoid(t) of width `dim` (FP32, shape (B, dim)): [cos(t f_i), sin(t f_i)], f_i =
// exp(-ln(max_period) i / half), i < half = dim / 2 (a zero column last when dim is odd).
// `t` holds raw integer steps. Computed exactly like the peer (same ops, same order).
torch::Tensor TimestepEmbedding(const torch::Tensor& t, int dim, double max_period = kMaxPeriod);

// How InitWeights draws (all from synthetic.h's generator, never LibTorch's RNG).
enum class InitMode {
  // PyTorch's defaults (kaiming-uniform a=sqrt(5) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for conv
  // and linear weights and biases; GroupNorm weight 1, bias 0) and the reference's zero-init of
  // each ResBlock's second conv (b.2), every attention proj (p) and the head conv (f.2).
  kReference,
  // The same uniform ranges for EVERY conv and linear (no zero-init), GroupNorm weight
  // U(0.75, 1.25) and bias U(-0.25, 0.25): a model whose output depends on every parameter,
  // for the same-function check against the peer (an untrained reference model outputs 0).
  kDense,
};

// Shared state of one forward: the time embedding and the layout rule.
struct ForwardContext {
  torch::Tensor emb;           // time MLP output (B, 4 base)
  bool channels_last = false;  // keep 5-D activations in ChannelsLast3d
  bool fused = false;          // GroupNorm(+SiLU, +emb add) through fused_group_norm.h
  // Fused runs: every ResBlock's e(SiLU(emb)), computed by UNet::forward as one linear over the
  // concatenated e weights and split (ResBlock k reads entry k); empty: each ResBlock computes
  // its own.
  std::vector<torch::Tensor> res_embs;
};

// One layer of a block (R, A or D), called with the block's running tensor.
class LayerModule : public torch::nn::Module {
 public:
  virtual torch::Tensor Forward(const torch::Tensor& x, const ForwardContext& ctx) = 0;
};

// An ordered list of submodules registered as "0", "1", ... (the peer's nn.ModuleList).
template <typename T>
class ListImpl : public torch::nn::Module {
 public:
  std::shared_ptr<T> Append(std::shared_ptr<T> m) {
    register_module(std::to_string(items_.size()), m);
    items_.push_back(m);
    return m;
  }
  const std::vector<std::shared_ptr<T>>& items() const { return items_; }

 private:
  std::vector<std::shared_ptr<T>> items_;
};
using LayerListImpl = ListImpl<LayerModule>;    // one block: its layers
using BlockListImpl = ListImpl<LayerListImpl>;  // I or O: the blocks

class TimeMlpImpl;
class HeadImpl;

class UNetImpl : public torch::nn::Module {
 public:
  // `model` must pass ValidateModel. Parameters are left at LibTorch's defaults until
  // InitWeights (Workload always calls it).
  explicit UNetImpl(const ModelOptions& model);

  // x: (B, in_channels, D, H, W) with D, H, W multiples of 2^(levels-1); t: (B,) int64 steps.
  // Returns the predicted noise (B, out_channels, D, H, W).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& t);

  // Draws every parameter from (seed, Stream::kWeights or kExport) in registration order.
  void InitWeights(uint64_t seed, InitMode mode);

  // Puts 5-D weights into ChannelsLast3d (or back) and makes forward keep activations there.
  void SetChannelsLast(bool on);
  bool channels_last() const { return channels_last_; }

  // GroupNorm (+ SiLU, + the ResBlock's embedding add) through medprof's fused kernels
  // (fused_group_norm.h; LibTorch's ops wherever they cannot run). Same parameters either way.
  void SetFused(bool on);
  bool fused() const { return fused_; }

  // Casts every conv and linear weight and bias to `dtype` (GroupNorm's parameters stay FP32),
  // for a model that only runs forwards under autocast to `dtype`: autocast would otherwise cast
  // each of them again at every call (about 160 casts per forward, a fifth of a fused forward's
  // CPU time with the profiler's op trace on). The same values reach the kernels. Not for
  // training (the optimizer keeps FP32 weights). Returns the number of tensors cast.
  int HoldWeightsIn(at::ScalarType dtype);

  const UNetPlan& plan() const { return plan_; }

 private:
  UNetPlan plan_;
  bool channels_last_ = false;
  bool fused_ = false;
  std::shared_ptr<TimeMlpImpl> time_;      // "t"
  std::shared_ptr<BlockListImpl> input_;   // "I"
  std::shared_ptr<LayerListImpl> middle_;  // "M"
  std::shared_ptr<BlockListImpl> output_;  // "O"
  std::shared_ptr<HeadImpl> head_;         // "f"
  std::vector<torch::nn::Linear> res_emb_;  // every ResBlock's e, in forward order
};
TORCH_MODULE(UNet);

}  // namespace medprof::meddpm
