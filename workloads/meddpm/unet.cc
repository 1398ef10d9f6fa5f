#include "workloads/meddpm/unet.h"

#include <cmath>
#include <string_view>

#include "workloads/meddpm/fused_group_norm.h"
#include "workloads/meddpm/fused_volume_ops.h"
#include "workloads/ddpm/synthetic.h"

namespace medprof::meddpm {

using ddpm::Rng;
using ddpm::Stream;

namespace nn = torch::nn;

namespace {

torch::Tensor Keep(const torch::Tensor& x, const ForwardContext& ctx) {
  if (ctx.channels_last && x.dim() == 5) return x.contiguous(at::MemoryFormat::ChannelsLast3d);
  return x;
}

nn::GroupNorm MakeGroupNorm(int groups, int channels) {
  return nn::GroupNorm(nn::GroupNormOptions(groups, channels).eps(kGroupNormEps).affine(true));
}

nn::Conv3d MakeConv3d(int in, int out, int kernel, int stride = 1) {
  return nn::Conv3d(nn::Conv3dOptions(in, out, kernel).stride(stride).padding(kernel / 2));
}

// A kernel-3, stride-1, padding-1 conv (MakeConv3d's shape for every k3 stride-1 conv) with an
// explicit weight and bias (undefined: none), for the fused paths that rearrange them.
torch::Tensor Conv3x3(const torch::Tensor& h, const torch::Tensor& weight, const torch::Tensor& bias) {
  return at::conv3d(h, weight, bias, /*stride=*/{1, 1, 1}, /*padding=*/{1, 1, 1});
}

// GroupNorm computed in FP32 whatever the input dtype (the reference's normalization() does
// x.float() then casts back; under autocast the output stays FP32 and the next conv casts it).
torch::Tensor GroupNormFp32(const nn::GroupNorm& gn, const torch::Tensor& x, const ForwardContext& ctx) {
  const torch::Tensor in = x.scalar_type() == at::kFloat ? x : x.to(at::kFloat);
  return Keep(at::group_norm(in, gn->options.num_groups(), gn->weight, gn->bias, gn->options.eps()), ctx);
}

// medprof's fused GroupNorm (+ SiLU when `silu`, + the per-channel `emb` add when defined):
// keeps x's dtype and layout (fused_group_norm.h); LibTorch's ops where the kernels cannot run.
torch::Tensor FusedGroupNorm(const nn::GroupNorm& gn, const torch::Tensor& x, const torch::Tensor& emb, bool silu) {
  return fused::GroupNormAct(x, emb, gn->options.num_groups(), gn->weight, gn->bias, gn->options.eps(), silu,
                             /*fused=*/true);
}

}  // namespace

// GroupNorm "0" -> SiLU (no parameters, index 1) -> Conv3d k3 "2": ResBlock halves a and b.
class NormActConvImpl : public nn::Module {
 public:
  NormActConvImpl(int groups, int in, int out) {
    norm_ = register_module("0", MakeGroupNorm(groups, in));
    conv_ = register_module("2", MakeConv3d(in, out, 3));
  }
  torch::Tensor Forward(const torch::Tensor& x, const ForwardContext& ctx) {
    if (ctx.fused) return Keep(conv_(FusedGroupNorm(norm_, x, torch::Tensor(), /*silu=*/true)), ctx);
    return Keep(conv_(at::silu(GroupNormFp32(norm_, x, ctx))), ctx);
  }
  // Fused only: conv(silu(GroupNorm(x + emb))) without materializing x + emb.
  torch::Tensor ForwardWithEmbedding(const torch::Tensor& x, const torch::Tensor& emb, const ForwardContext& ctx) {
    return Keep(conv_(FusedGroupNorm(norm_, x, emb, /*silu=*/true)), ctx);
  }
  // Fused only: Forward without the conv's bias, for a caller that folds the bias (a per-channel
  // constant) into the next GroupNorm's embedding add instead of a broadcast add over the volume.
  torch::Tensor ForwardWithoutBias(const torch::Tensor& x, const ForwardContext& ctx) {
    const torch::Tensor h = FusedGroupNorm(norm_, x, torch::Tensor(), /*silu=*/true);
    return Keep(Conv3x3(h, conv_->weight, torch::Tensor()), ctx);
  }
  const torch::Tensor& conv_bias() const { return conv_->bias; }
  const nn::GroupNorm& norm() const { return norm_; }
  const nn::Conv3d& conv() const { return conv_; }


 private:
  nn::GroupNorm norm_{nullptr};
  nn::Conv3d conv_{nullptr};
};

namespace {

// R: h = a(x) + e(SiLU(emb)); h = b(h); out = k(x) + h (k = identity when Cin == Cout).
class ResBlockImpl : public LayerModule {
 public:
  // `slot`: this block's entry in ForwardContext::res_embs.
  ResBlockImpl(int groups, int in, int out, int emb, size_t slot) : slot_(slot) {
    a_ = register_module("a", std::make_shared<NormActConvImpl>(groups, in, out));
    e_ = register_module("e", nn::Linear(emb, out));
    b_ = register_module("b", std::make_shared<NormActConvImpl>(groups, out, out));
    if (in != out) k_ = register_module("k", MakeConv3d(in, out, 1));
  }
  torch::Tensor Forward(const torch::Tensor& x, const ForwardContext& ctx) override {
    // Same evaluation order as the peer: skip first.
    const torch::Tensor skip = k_.is_empty() ? x : Keep(k_(x), ctx);
    if (ctx.fused && x.is_cuda()) {
      // a's conv bias joins the embedding: GroupNorm(conv(..) + bias + e) with one per-channel
      // add inside b's kernels instead of cuDNN's broadcast bias add over the whole volume.
      const torch::Tensor h = a_->ForwardWithoutBias(x, ctx);
      const torch::Tensor e = Embedding(ctx) + a_->conv_bias();
      return Keep(skip + b_->ForwardWithEmbedding(h, e, ctx), ctx);
    }
    torch::Tensor h = a_->Forward(x, ctx);
    const torch::Tensor e = Embedding(ctx);
    if (ctx.fused) {
      h = b_->ForwardWithEmbedding(h, e, ctx);  // the add happens inside b's GroupNorm
    } else {
      h = h + e.view({e.size(0), e.size(1), 1, 1, 1});
      h = b_->Forward(h, ctx);
    }
    return Keep(skip + h, ctx);
  }
  const nn::Linear& e() const { return e_; }

 private:
  torch::Tensor Embedding(const ForwardContext& ctx) {
    return slot_ < ctx.res_embs.size() ? ctx.res_embs[slot_] : e_(at::silu(ctx.emb));
  }

  size_t slot_;
  std::shared_ptr<NormActConvImpl> a_, b_;
  nn::Linear e_{nullptr};
  nn::Conv3d k_{nullptr};
};

// A: single-head self-attention over the D*H*W tokens, legacy order (q, k, v are the channel
// thirds of qkv), q and k each scaled by C^-1/4, softmax in FP32, out = x + proj(a).
class AttentionImpl : public LayerModule {
 public:
  AttentionImpl(int groups, int channels) {
    n_ = register_module("n", MakeGroupNorm(groups, channels));
    q_ = register_module("q", nn::Conv1d(nn::Conv1dOptions(channels, 3 * channels, 1)));
    p_ = register_module("p", nn::Conv1d(nn::Conv1dOptions(channels, channels, 1)));
  }
  torch::Tensor Forward(const torch::Tensor& x, const ForwardContext& ctx) override {
    const int64_t batch = x.size(0), channels = x.size(1);
    const torch::Tensor h = x.reshape({batch, channels, -1});
    const torch::Tensor qkv =
        q_(ctx.fused ? FusedGroupNorm(n_, h, torch::Tensor(), /*silu=*/false) : GroupNormFp32(n_, h, ctx));
    const std::vector<torch::Tensor> parts = qkv.chunk(3, 1);
    const double scale = 1.0 / std::sqrt(std::sqrt(static_cast<double>(channels)));
    // weights[b, t, s] = sum_c q[b, c, t] k[b, c, s]
    torch::Tensor weights = at::bmm((parts[0] * scale).transpose(1, 2), parts[1] * scale);
    weights = at::softmax(weights, -1, at::kFloat);
    // a[b, c, t] = sum_s weights[b, t, s] v[b, c, s]
    const torch::Tensor attended = at::bmm(parts[2], weights.transpose(1, 2));
    return Keep(x + p_(attended).reshape(x.sizes()), ctx);
  }

 private:
  nn::GroupNorm n_{nullptr};
  nn::Conv1d q_{nullptr}, p_{nullptr};
};

// D: Conv3d k3 "c" (stride 1: input conv; stride 2: downsample), optionally after a trilinear
// x2 upsample (align_corners false).
//
// Input conv under the fused preset on a GPU: its few input channels (3 in Med-DDPM) are padded
// with zero channels, and its weight with zero input slices, to a multiple of 8 — the same
// result, but cuDNN's Tensor Core kernels need 8 channels (16 bytes of BF16): with 3 channels
// channels-last BF16 forward took a generic implicit_convolveNd_sgemm kernel of 1.76 ms per
// step on the H200; padded, the forward conv phase is 0.26 ms shorter with the pad's copy paid.
class ConvLayerImpl : public LayerModule {
 public:
  ConvLayerImpl(int in, int out, int stride, bool upsample, bool input_conv = false)
      : upsample_(upsample), pad_channels_(input_conv && stride == 1 && in % 8 != 0 ? 8 - in % 8 : 0) {
    c_ = register_module("c", MakeConv3d(in, out, 3, stride));
  }
  torch::Tensor Forward(const torch::Tensor& x, const ForwardContext& ctx) override {
    if (pad_channels_ > 0 && ctx.fused && x.is_cuda()) {
      const std::vector<int64_t> pad = {0, 0, 0, 0, 0, 0, 0, pad_channels_};  // (W, H, D, C) low/high
      const torch::Tensor xp = Keep(at::constant_pad_nd(x, pad), ctx);
      const torch::Tensor wp = Keep(at::constant_pad_nd(c_->weight, pad), ctx);
      return Keep(Conv3x3(xp, wp, c_->bias), ctx);
    }
    if (!upsample_) return Keep(c_(x), ctx);
    // Fused: medprof's channels-last kernel in the activations' dtype (fused_volume_ops.h).
    const torch::Tensor up = Keep(fused::UpsampleTrilinearX2(x, ctx.fused), ctx);
    return Keep(c_(up), ctx);
  }

 private:
  bool upsample_;
  int64_t pad_channels_;
  nn::Conv3d c_{nullptr};
};

bool IsZeroInit(std::string_view name) {
  auto ends_with = [name](std::string_view suffix) {
    return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  return ends_with(".b.2") || ends_with(".p") || name == "f.2";
}

void FillUniform(torch::Tensor& p, Rng& rng, double lo, double hi) {
  std::vector<float> values(p.numel());
  rng.FillUniform(values.data(), static_cast<int64_t>(values.size()), lo, hi);
  p.copy_(torch::from_blob(values.data(), p.sizes(), torch::kFloat));
}

void InitAffine(torch::Tensor& weight, torch::Tensor& bias, Rng& rng, bool zero) {
  if (zero) {
    weight.zero_();
    if (bias.defined()) bias.zero_();
    return;
  }
  // kaiming_uniform_(a=sqrt(5)) and PyTorch's bias rule both give U(-1/sqrt(fan_in), ..).
  const double bound = 1.0 / std::sqrt(static_cast<double>(weight.numel() / weight.size(0)));
  FillUniform(weight, rng, -bound, bound);
  if (bias.defined()) FillUniform(bias, rng, -bound, bound);
}

}  // namespace

// "t": Linear "0" -> SiLU -> Linear "2".
class TimeMlpImpl : public nn::Module {
 public:
  TimeMlpImpl(int in, int out) {
    l0_ = register_module("0", nn::Linear(in, out));
    l2_ = register_module("2", nn::Linear(out, out));
  }
  torch::Tensor Forward(const torch::Tensor& x) { return l2_(at::silu(l0_(x))); }

 private:
  nn::Linear l0_{nullptr}, l2_{nullptr};
};

// "f": GroupNorm "0" -> SiLU -> Conv3d k3 "2" (base -> out_channels).
//
// Fused: the conv's backward through medprof's kernels for few output channels
// (fused_volume_ops.h): cuDNN's BF16 weight gradient for Med-DDPM's one output filter is a
// direct kernel of 27-34 ms per step on the H200 in either layout.
class HeadImpl : public NormActConvImpl {
 public:
  using NormActConvImpl::NormActConvImpl;
  torch::Tensor Forward(const torch::Tensor& x, const ForwardContext& ctx) {
    if (!ctx.fused) return NormActConvImpl::Forward(x, ctx);
    const torch::Tensor h = FusedGroupNorm(norm(), x, torch::Tensor(), /*silu=*/true);
    return Keep(fused::SmallConv3x3(h, conv()->weight, conv()->bias, /*fused=*/true), ctx);
  }
};

torch::Tensor TimestepEmbedding(const torch::Tensor& t, int dim, double max_period) {
  const int64_t half = dim / 2;
  // The peer's ops in the peer's order: exp(-ln(P) * arange(half) / half), t.float() * freqs.
  const torch::Tensor freqs =
      at::exp(at::arange(half, t.options().dtype(at::kLong)) * (-std::log(max_period)) / half);
  const torch::Tensor args = t.to(at::kFloat).unsqueeze(1) * freqs.unsqueeze(0);
  const auto options = t.options().dtype(at::kFloat);
  torch::Tensor emb =
      (dim % 2 != 0) ? at::zeros({t.size(0), dim}, options) : at::empty({t.size(0), dim}, options);
  // Written in place (no aten::cat): [cos | sin].
  torch::Tensor cos_part = emb.narrow(1, 0, half);
  torch::Tensor sin_part = emb.narrow(1, half, half);
  at::cos_out(cos_part, args);
  at::sin_out(sin_part, args);
  return emb;
}

UNetImpl::UNetImpl(const ModelOptions& model) : plan_(MakePlan(model)) {
  const int groups = model.groups, emb = plan_.time_embed_dim;
  auto make_layer = [&](const Layer& l) -> std::shared_ptr<LayerModule> {
    switch (l.kind) {
      case LayerKind::kInputConv:
        return std::make_shared<ConvLayerImpl>(l.in_channels, l.out_channels, 1, false, /*input_conv=*/true);
      case LayerKind::kResBlock: {
        auto block = std::make_shared<ResBlockImpl>(groups, l.in_channels, l.out_channels, emb, res_emb_.size());
        res_emb_.push_back(block->e());
        return block;
      }
      case LayerKind::kAttention:
        return std::make_shared<AttentionImpl>(groups, l.in_channels);
      case LayerKind::kDownsample:
        return std::make_shared<ConvLayerImpl>(l.in_channels, l.out_channels, 2, false);
      case LayerKind::kUpsample:
        return std::make_shared<ConvLayerImpl>(l.in_channels, l.out_channels, 1, true);
    }
    return nullptr;
  };
  auto make_blocks = [&](const std::vector<Block>& blocks) {
    auto list = std::make_shared<BlockListImpl>();
    for (const Block& b : blocks) {
      auto layers = std::make_shared<LayerListImpl>();
      for (const Layer& l : b.layers) layers->Append(make_layer(l));
      list->Append(layers);
    }
    return list;
  };
  time_ = register_module("t", std::make_shared<TimeMlpImpl>(model.base_channels, emb));
  input_ = register_module("I", make_blocks(plan_.input_blocks));
  middle_ = std::make_shared<LayerListImpl>();
  for (const Layer& l : plan_.middle) middle_->Append(make_layer(l));
  register_module("M", middle_);
  output_ = register_module("O", make_blocks(plan_.output_blocks));
  head_ = register_module("f", std::make_shared<HeadImpl>(groups, plan_.head_channels, model.out_channels));
}

torch::Tensor UNetImpl::forward(const torch::Tensor& x, const torch::Tensor& t) {
  ForwardContext ctx;
  ctx.channels_last = channels_last_;
  ctx.fused = fused_;
  ctx.emb = time_->Forward(TimestepEmbedding(t, plan_.model.base_channels));
  if (fused_ && ctx.emb.is_cuda() && !res_emb_.empty()) {
    // Every ResBlock's e(SiLU(emb)) as one linear: 1 SiLU + 1 GEMM (+ 2 weight casts under
    // autocast) per forward instead of 17 + 17 (+ 34). GPU only, like the other fused paths (on
    // the CPU the fused model stays bit-identical to the unfused one).
    std::vector<torch::Tensor> weights, biases;
    std::vector<int64_t> sizes;
    for (const nn::Linear& l : res_emb_) {
      weights.push_back(l->weight);
      biases.push_back(l->bias);
      sizes.push_back(l->weight.size(0));
    }
    const torch::Tensor all = at::linear(at::silu(ctx.emb), at::cat(weights, 0), at::cat(biases, 0));
    ctx.res_embs = all.split_with_sizes(sizes, 1);
  }
  std::vector<torch::Tensor> skips;
  skips.reserve(input_->items().size());
  torch::Tensor h = Keep(x, ctx);
  for (const auto& block : input_->items()) {
    for (const auto& layer : block->items()) h = layer->Forward(h, ctx);
    skips.push_back(h);
  }
  for (const auto& layer : middle_->items()) h = layer->Forward(h, ctx);
  for (const auto& block : output_->items()) {
    h = Keep(at::cat({h, skips.back()}, 1), ctx);  // decoder tensor first, skip second
    skips.pop_back();
    for (const auto& layer : block->items()) h = layer->Forward(h, ctx);
  }
  return head_->Forward(h, ctx);
}

void UNetImpl::InitWeights(uint64_t seed, InitMode mode) {
  torch::NoGradGuard no_grad;
  Rng rng(seed, mode == InitMode::kReference ? Stream::kWeights : Stream::kExport, 0);
  // named_modules is pre-order in registration order, and parameters live in leaves only, so
  // this visits parameters in named_parameters() order.
  for (const auto& item : named_modules("", /*include_self=*/false)) {
    const std::string& name = item.key();
    nn::Module& m = *item.value();
    const bool zero = mode == InitMode::kReference && IsZeroInit(name);
    if (auto* conv3 = m.as<nn::Conv3dImpl>()) {
      InitAffine(conv3->weight, conv3->bias, rng, zero);
    } else if (auto* conv1 = m.as<nn::Conv1dImpl>()) {
      InitAffine(conv1->weight, conv1->bias, rng, zero);
    } else if (auto* linear = m.as<nn::LinearImpl>()) {
      InitAffine(linear->weight, linear->bias, rng, zero);
    } else if (auto* gn = m.as<nn::GroupNormImpl>()) {
      if (mode == InitMode::kReference) {
        gn->weight.fill_(1.0);
        gn->bias.zero_();
      } else {
        FillUniform(gn->weight, rng, 0.75, 1.25);
        FillUniform(gn->bias, rng, -0.25, 0.25);
      }
    }
  }
}

void UNetImpl::SetFused(bool on) { fused_ = on; }

int UNetImpl::HoldWeightsIn(at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  int cast = 0;
  for (const auto& m : modules(/*include_self=*/false)) {
    if (m->as<nn::Conv3dImpl>() == nullptr && m->as<nn::Conv1dImpl>() == nullptr && m->as<nn::LinearImpl>() == nullptr) {
      continue;
    }
    for (torch::Tensor& p : m->parameters(/*recurse=*/false)) {
      if (p.scalar_type() == dtype) continue;
      p.set_data(p.data().to(dtype));  // keeps the memory format (ChannelsLast3d weights stay so)
      ++cast;
    }
  }
  return cast;
}

void UNetImpl::SetChannelsLast(bool on) {
  torch::NoGradGuard no_grad;
  const auto format = on ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::Contiguous;
  for (torch::Tensor& p : parameters()) {
    if (p.dim() == 5) p.set_data(p.data().contiguous(format));
  }
  channels_last_ = on;
}

}  // namespace medprof::meddpm
