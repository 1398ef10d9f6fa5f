#include "workloads/meddpm/architecture.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/request_limits.h"

namespace medprof::meddpm {
namespace {

using limits::kMaxBaseChannels;
using limits::kMaxCpuThreads;
using limits::kMaxGroups;
using limits::kMaxInOutChannels;
using limits::kMaxLevels;
using limits::kMaxMult;
using limits::kMaxResBlocks;
using limits::kMaxVolume;
using limits::kMinBaseChannels;
using limits::kMinVolume;

absl::Status OutOfRange(absl::string_view field, double value, absl::string_view allowed) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", value, " is out of range (allowed ", allowed, ")"));
}

absl::Status CheckRange(absl::string_view field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return OutOfRange(field, static_cast<double>(v), absl::StrCat(lo, "..", hi));
  }
  return absl::OkStatus();
}

bool HasAttention(const ModelOptions& m, int level) {
  const int ds = 1 << level;
  return std::find(m.attention_ds.begin(), m.attention_ds.end(), ds) != m.attention_ds.end();
}

int64_t Conv3dParameters(int64_t in, int64_t out, int64_t k) { return k * k * k * in * out + out; }

}  // namespace

absl::Status ValidateModel(const ModelOptions& m) {
  const int levels = static_cast<int>(m.channel_mult.size());
  if (levels < 1 || levels > kMaxLevels) {
    return OutOfRange("channel_mult (number of levels)", levels, absl::StrCat("1..", kMaxLevels));
  }
  for (int mult : m.channel_mult) {
    if (mult < 1 || mult > kMaxMult) {
      return OutOfRange("channel_mult", mult, absl::StrCat("1..", kMaxMult, " per level"));
    }
  }
  MEDPROF_RETURN_IF_ERROR(CheckRange("base_channels", m.base_channels, kMinBaseChannels, kMaxBaseChannels));
  MEDPROF_RETURN_IF_ERROR(CheckRange("res_blocks", m.res_blocks, 1, kMaxResBlocks));
  MEDPROF_RETURN_IF_ERROR(CheckRange("in_channels", m.in_channels, 1, kMaxInOutChannels));
  MEDPROF_RETURN_IF_ERROR(CheckRange("out_channels", m.out_channels, 1, kMaxInOutChannels));
  if (m.out_channels > m.in_channels) {
    return absl::InvalidArgumentError(
        absl::StrCat("out_channels: ", m.out_channels, " exceeds in_channels ", m.in_channels,
                     " (the input is the noisy image (out_channels) plus the mask channels)"));
  }
  MEDPROF_RETURN_IF_ERROR(CheckRange("groups", m.groups, 1, kMaxGroups));
  for (int mult : m.channel_mult) {
    const int ch = m.base_channels * mult;
    if (ch % m.groups != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("groups: ", m.groups, " does not divide the level width ", ch,
                       " (base_channels x channel_mult); choose groups dividing every level width"));
    }
  }
  if (m.base_channels % m.groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups: ", m.groups, " does not divide base_channels ", m.base_channels));
  }
  const int multiple = 1 << (levels - 1);
  for (int ds : m.attention_ds) {
    if (ds < 1 || ds > multiple || (ds & (ds - 1)) != 0) {
      return OutOfRange("attention_ds", ds, absl::StrCat("a power of two, 1..", multiple));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const WorkloadOptions& o) {
  MEDPROF_RETURN_IF_ERROR(ValidateModel(o.model));
  const int multiple = 1 << (static_cast<int>(o.model.channel_mult.size()) - 1);
  const std::pair<const char*, int> edges[] = {{"depth", o.depth}, {"height", o.height}, {"width", o.width}};
  for (const auto& [field, v] : edges) {
    if (v < kMinVolume || v > kMaxVolume || v % multiple != 0) {
      return OutOfRange(field, v,
                        absl::StrCat(kMinVolume, "..", kMaxVolume, ", a multiple of ", multiple,
                                     " for a model with this many levels"));
    }
  }
  MEDPROF_RETURN_IF_ERROR(ddpm::ValidateLoopOptions(LoopOptionsOf(o)));  // batch, steps, training knobs
  MEDPROF_RETURN_IF_ERROR(CheckRange("cpu_threads", o.cpu_threads, 0, kMaxCpuThreads));
  return absl::OkStatus();
}

ddpm::LoopOptions LoopOptionsOf(const WorkloadOptions& o) {
  ddpm::LoopOptions l;
  l.phase = o.phase;
  l.depth = o.depth;
  l.height = o.height;
  l.width = o.width;
  l.batch = o.batch;
  l.image_channels = o.model.out_channels;
  l.cond_channels = o.model.in_channels - o.model.out_channels;
  l.steps = o.steps;
  l.warmup = o.warmup;
  l.grad_accum = o.grad_accum;
  l.learning_rate = o.learning_rate;
  l.seed = o.seed;
  l.sample_steps = o.sample_steps;
  l.fixed_noise = o.fixed_noise;
  l.bf16 = o.bf16;
  return l;
}

UNetPlan MakePlan(const ModelOptions& m) {
  UNetPlan p;
  p.model = m;
  p.levels = static_cast<int>(m.channel_mult.size());
  p.time_embed_dim = 4 * m.base_channels;
  const int base = m.base_channels;

  std::vector<int> skips;  // channels of every input block's output, a stack
  p.input_blocks.push_back({{{LayerKind::kInputConv, m.in_channels, base, 0}}, 0, 0});
  skips.push_back(base);
  int ch = base;
  for (int l = 0; l < p.levels; ++l) {
    const int out = base * m.channel_mult[l];
    for (int r = 0; r < m.res_blocks; ++r) {
      Block b{{{LayerKind::kResBlock, ch, out, l}}, l, 0};
      if (HasAttention(m, l)) b.layers.push_back({LayerKind::kAttention, out, out, l});
      p.input_blocks.push_back(b);
      ch = out;
      skips.push_back(ch);
    }
    if (l + 1 < p.levels) {
      p.input_blocks.push_back({{{LayerKind::kDownsample, ch, ch, l}}, l, 0});
      skips.push_back(ch);
    }
  }
  const int deepest = p.levels - 1;
  p.middle = {{LayerKind::kResBlock, ch, ch, deepest},
              {LayerKind::kAttention, ch, ch, deepest},
              {LayerKind::kResBlock, ch, ch, deepest}};
  for (int l = deepest; l >= 0; --l) {
    const int out = base * m.channel_mult[l];
    for (int i = 0; i <= m.res_blocks; ++i) {
      const int skip = skips.back();
      skips.pop_back();
      Block b{{{LayerKind::kResBlock, ch + skip, out, l}}, l, skip};
      if (HasAttention(m, l)) b.layers.push_back({LayerKind::kAttention, out, out, l});
      if (l > 0 && i == m.res_blocks) b.layers.push_back({LayerKind::kUpsample, out, out, l});
      p.output_blocks.push_back(b);
      ch = out;
    }
  }
  p.head_channels = ch;
  return p;
}

int64_t LayerParameters(const Layer& layer, int time_embed_dim) {
  const int64_t in = layer.in_channels, out = layer.out_channels;
  switch (layer.kind) {
    case LayerKind::kInputConv:
    case LayerKind::kDownsample:
    case LayerKind::kUpsample:
      return Conv3dParameters(in, out, 3);
    case LayerKind::kResBlock: {
      int64_t n = 2 * in + Conv3dParameters(in, out, 3) +             // a: GN, conv
                  static_cast<int64_t>(time_embed_dim) * out + out +  // e: Linear
                  2 * out + Conv3dParameters(out, out, 3);            // b: GN, conv
      if (in != out) n += Conv3dParameters(in, out, 1);               // k: 1x1x1 skip
      return n;
    }
    case LayerKind::kAttention:
      return 2 * in + (3 * in * in + 3 * in) + (in * in + in);  // n, q (qkv), p (proj)
  }
  return 0;
}

int64_t TimeMlpParameters(const UNetPlan& p) {
  const int64_t b = p.model.base_channels, e = p.time_embed_dim;
  return b * e + e + e * e + e;
}

int64_t HeadParameters(const UNetPlan& p) {
  return 2 * static_cast<int64_t>(p.head_channels) +
         Conv3dParameters(p.head_channels, p.model.out_channels, 3);
}

std::vector<ParameterGroup> ParameterBreakdown(const UNetPlan& p) {
  std::vector<ParameterGroup> groups;
  groups.push_back({"time MLP", TimeMlpParameters(p)});
  groups.push_back({"input conv", LayerParameters(p.input_blocks[0].layers[0], p.time_embed_dim)});
  std::vector<int64_t> enc(p.levels, 0), dec(p.levels, 0);
  for (size_t i = 1; i < p.input_blocks.size(); ++i) {
    for (const Layer& l : p.input_blocks[i].layers) {
      enc[p.input_blocks[i].level] += LayerParameters(l, p.time_embed_dim);
    }
  }
  for (const Block& b : p.output_blocks) {
    for (const Layer& l : b.layers) dec[b.level] += LayerParameters(l, p.time_embed_dim);
  }
  for (int l = 0; l < p.levels; ++l) groups.push_back({absl::StrCat("enc L", l), enc[l]});
  int64_t middle = 0;
  for (const Layer& l : p.middle) middle += LayerParameters(l, p.time_embed_dim);
  groups.push_back({"middle", middle});
  for (int l = p.levels - 1; l >= 0; --l) groups.push_back({absl::StrCat("dec L", l), dec[l]});
  groups.push_back({"head", HeadParameters(p)});
  return groups;
}

int64_t CountParameters(const ModelOptions& model) {
  if (!ValidateModel(model).ok()) return 0;
  int64_t total = 0;
  for (const ParameterGroup& g : ParameterBreakdown(MakePlan(model))) total += g.parameters;
  return total;
}

// ------------------------------------------------------------------------------ memory
//
// Counts are in elements and converted to bytes at the end (4 bytes each: FP32 activations).
//
// Training (spec §3.3): the tensors autograd keeps alive until the backward pass.
//   net input, input conv output       (in_channels + base) x V0
//   ResBlock(Cin -> Cout) at V         (2 Cin + 3 Cout) V: the inputs of the first SiLU and conv,
//                                      the emb-added h, the second GN's and SiLU's outputs;
//                                      + Cin V when its input is a fresh concatenation (decoder);
//                                      + Cout V when the next layer keeps its output (GroupNorm or
//                                      conv: every encoder and middle block, a decoder block
//                                      followed by attention, the last decoder block; not one
//                                      followed by a concatenation or a trilinear upsample)
//   attention(C, T tokens)             7 C T + B T^2: GN output, qkv, scaled q and k, softmax
//                                      probabilities (fp32), attended values (the reference
//                                      checkpoints attention; this port and the PyTorch peer do
//                                      not); + C T for its output under the same rule
//   downsample                         its output C V/8
//   upsample                           the interpolated C x 8V its conv keeps
//   head                               2 base V0 (GN and SiLU outputs), prediction and residual
//                                      2 out V0
// State: weights, Adam m and v, the EMA copy (4 x 4 bytes per parameter), + the gradients
// when they live through the forward (grad_accum > 1; with 1 they are reset to none after
// each optimizer step, as the peer's zero_grad(set_to_none=True)).
//
// Forward / sample (no autograd): weights, the persistent inputs (net input, x0 / x_t, eps), and
// the largest set of simultaneously live activations, found by walking the forward in execution
// order (skip stack + current tensor + the temporaries of the running layer: e.g. the
// concatenated input, the 1x1 skip output, GN and SiLU outputs of a decoder ResBlock at V0).
//
// Both add one base-width volume at V0 (base x V0) for cuDNN workspaces and the first backward
// gradients. At the defaults this gives 18.4 GiB for train (state 0.75 GiB incl. EMA and
// gradients, saved activations 17.2 GiB) and 4.7 GiB for forward; spec §3.3 measured 18.69 and
// 4.55 GiB with the PyTorch peer (its §3.3 sum of 18.2 GiB also counts decoder block outputs
// that feed a concatenation or an upsample, which autograd does not keep).
//
// bf16 autocast keeps GroupNorm and its saved inputs in FP32 but halves the conv inputs it
// saves; spec §3.3's measured peaks are 0.90x (train) and 0.91x (forward) of FP32, applied here
// to the activation part.
// Element counts at each U-Net level of a volume (batch included) and attention tokens.
struct LevelSizes {
  const WorkloadOptions& o;
  double voxels(int level) const {
    const double f = std::ldexp(1.0, -level);
    return o.batch * std::max(1.0, std::floor(o.depth * f)) * std::max(1.0, std::floor(o.height * f)) *
           std::max(1.0, std::floor(o.width * f));
  }
  double tokens(int level) const { return voxels(level) / o.batch; }
};

// Train: what autograd keeps for the backward, layer by layer, in elements.
double TrainActivations(const WorkloadOptions& o, const UNetPlan& p) {
  const LevelSizes z{o};
  const double batch = o.batch, v0 = z.voxels(0);
  const int base = o.model.base_channels, in = o.model.in_channels, out = o.model.out_channels;
  double elements = 0.0;
  // Every layer in execution order, with whether its input is a fresh concatenation and
  // whether its consumer keeps its output.
  struct Step {
    Layer layer;
    bool fresh_concat = false;
    bool output_kept = true;
  };
  std::vector<Step> steps;
  for (const Block& b : p.input_blocks) {
    for (const Layer& l : b.layers) steps.push_back({l, false, true});
  }
  for (const Layer& l : p.middle) steps.push_back({l, false, true});
  for (size_t bi = 0; bi < p.output_blocks.size(); ++bi) {
    const Block& b = p.output_blocks[bi];
    const bool last_block = bi + 1 == p.output_blocks.size();
    for (size_t li = 0; li < b.layers.size(); ++li) {
      const bool last_layer = li + 1 == b.layers.size();
      const bool next_keeps = last_layer ? last_block  // the head's GroupNorm
                                         : b.layers[li + 1].kind == LayerKind::kAttention;
      steps.push_back({b.layers[li], li == 0, next_keeps});
    }
  }
  for (const Step& s : steps) {
    const Layer& l = s.layer;
    const double v = z.voxels(l.level);
    switch (l.kind) {
      case LayerKind::kInputConv:
        elements += static_cast<double>(in + base) * v;
        break;
      case LayerKind::kResBlock:
        elements += (2.0 * l.in_channels + 3.0 * l.out_channels + (s.fresh_concat ? l.in_channels : 0) +
                        (s.output_kept ? l.out_channels : 0)) *
                       v;
        break;
      case LayerKind::kAttention: {
        const double t = z.tokens(l.level);
        elements += (7.0 + (s.output_kept ? 1.0 : 0.0)) * l.in_channels * v + batch * t * t;
        break;
      }
      case LayerKind::kDownsample:
        elements += static_cast<double>(l.out_channels) * z.voxels(l.level + 1);
        break;
      case LayerKind::kUpsample:
        elements += static_cast<double>(l.out_channels) * z.voxels(l.level - 1);
        break;
    }
  }
  return elements + (2.0 * p.head_channels + 2.0 * out) * v0;
}

// Forward: the peak of what is alive at once along the walk, in elements.
double ForwardPeakActivations(const WorkloadOptions& o, const UNetPlan& p) {
  const LevelSizes z{o};
  const double batch = o.batch, v0 = z.voxels(0);
  const int base = o.model.base_channels, in = o.model.in_channels, out = o.model.out_channels;
  // Forward walk: `stack` holds the skip tensors; note() records persistent + stack + live.
  const double persistent = (in + 2.0 * out) * v0;  // net input, x0 / x_t state, eps
  double stack = 0.0, peak = 0.0;
  auto note = [&](double live) { peak = std::max(peak, persistent + stack + live); };
  auto resblock = [&](const Layer& l, double input_held) {
    const double v = z.voxels(l.level);
    const double cin = l.in_channels * v, cout = l.out_channels * v;
    const double k = l.in_channels != l.out_channels ? cout : 0.0;  // 1x1 skip output
    // First GN + SiLU outputs, then SiLU + conv output, then h + GN + SiLU of the second half.
    note(input_held + k + std::max({2.0 * cin, cin + cout, 3.0 * cout}));
    return cout;
  };
  auto attention = [&](const Layer& l, double input_held) {
    const double t = z.tokens(l.level), ct = l.in_channels * z.voxels(l.level);
    note(input_held + 5.0 * ct + 2.0 * batch * t * t);  // qkv, q, k, a, out; logits, probs
    return ct;
  };
  auto layer = [&](const Layer& l, double cur) {
    switch (l.kind) {
      case LayerKind::kInputConv:
        note(base * v0);
        return base * v0;
      case LayerKind::kResBlock:
        return resblock(l, cur);
      case LayerKind::kAttention:
        return attention(l, cur);
      case LayerKind::kDownsample: {
        const double down = l.out_channels * z.voxels(l.level + 1);
        note(cur + down);
        return down;
      }
      case LayerKind::kUpsample: {
        const double up = l.out_channels * z.voxels(l.level - 1);
        note(cur + 2.0 * up);  // interpolated + conv output
        return up;
      }
    }
    return cur;
  };
  for (const Block& b : p.input_blocks) {
    double x = 0.0;  // the block's input is the stack's top: already counted
    for (const Layer& l : b.layers) x = layer(l, x);
    stack += x;
  }
  double cur = 0.0;
  for (const Layer& l : p.middle) cur = layer(l, cur);
  for (const Block& b : p.output_blocks) {
    const double skip = b.skip_channels * z.voxels(b.level);
    note(cur + cur + skip);  // both inputs (the skip still on the stack) + the concatenation
    stack -= skip;
    cur += skip;
    for (const Layer& l : b.layers) cur = layer(l, cur);
  }
  note(cur + 2.0 * p.head_channels * v0 + out * v0);  // head: GN, SiLU, conv outputs
  return peak;
}

MemoryEstimate EstimateMemory(const WorkloadOptions& o) {
  MemoryEstimate est;
  if (!ValidateModel(o.model).ok()) return est;
  const UNetPlan p = MakePlan(o.model);
  const int64_t params = CountParameters(o.model);
  const bool train = o.phase == Phase::kTrain;
  double activations = train ? TrainActivations(o, p) : ForwardPeakActivations(o, p);  // elements
  est.state_bytes = static_cast<uint64_t>(params) * 4 * (train ? (o.grad_accum > 1 ? 5 : 4) : 1);
  activations += static_cast<double>(o.model.base_channels) * LevelSizes{o}.voxels(0);  // workspaces, first gradients
  if (o.bf16) activations *= train ? 0.90 : 0.91;
  est.activation_bytes = static_cast<uint64_t>(activations * 4.0);
  est.total_bytes = est.state_bytes + est.activation_bytes;
  return est;
}

uint64_t EstimatePeakMemoryBytes(const WorkloadOptions& options) {
  return EstimateMemory(options).total_bytes;
}

}  // namespace medprof::meddpm
