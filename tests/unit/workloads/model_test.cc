// The LibTorch side of the Med-DDPM workload: the U-Net module against the spec (names, counts,
// op counts, embedding, shapes, zero output at init, layouts, bf16) and the Workload (phases and
// observer, training that learns, sampling, determinism, flags read back, errors).
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "workloads/meddpm/architecture.h"
#include "workloads/ddpm/adam.h"
#include "workloads/meddpm/fused_group_norm.h"
#include "workloads/meddpm/fused_volume_ops.h"
#include "workloads/ddpm/synthetic.h"
#include "workloads/ddpm/torch_compat.h"
#include "workloads/meddpm/unet.h"
#include "workloads/meddpm/workload.h"

namespace medprof::meddpm {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ddpm::Fnv1a64;
using ddpm::ForeachAdam;
namespace compat = ddpm::compat;

ModelOptions TinyModel() {
  ModelOptions m;
  m.base_channels = 8;
  m.channel_mult = {1, 2};
  m.attention_ds = {2};
  m.groups = 4;
  return m;
}

WorkloadOptions TinyOptions(Phase phase) {
  WorkloadOptions o;
  o.model = TinyModel();
  o.phase = phase;
  o.depth = o.height = o.width = 8;
  o.steps = 2;
  o.warmup = 1;
  o.device = Device::kCpu;
  return o;
}

// One default-width model (40 M parameters) shared by the tests that need the real thing.
UNet& DefaultNet() {
  static UNet* net = [] {
    auto* n = new UNet(ModelOptions{});
    (*n)->InitWeights(0, InitMode::kReference);
    (*n)->eval();
    return n;
  }();
  return *net;
}

torch::Tensor RandomInput(int64_t c, int64_t d, int64_t h, int64_t w, uint64_t seed) {
  torch::manual_seed(seed);  // test data only; the workload never uses LibTorch's RNG
  return torch::randn({1, c, d, h, w});
}

// Counts aten:: ops through a global RecordFunction callback while alive.
class OpCounter {
 public:
  OpCounter() {
    counts_ = &counts;
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          ++(*counts_)[std::string(fn.name())];
          return nullptr;
        }).scopes({at::RecordScope::FUNCTION}));
  }
  ~OpCounter() {
    at::removeCallback(handle_);
    counts_ = nullptr;
  }
  std::map<std::string, int> counts;

 private:
  static inline std::map<std::string, int>* counts_ = nullptr;
  at::CallbackHandle handle_;
};

// ---------------------------------------------------------------- the module

TEST(UNetTest, ModuleParametersAgreeWithThePlanForSmallAndBratsShapes) {
  for (const ModelOptions& m : {TinyModel(), [] {
                                  ModelOptions b = TinyModel();
                                  b.in_channels = 8;
                                  b.out_channels = 4;
                                  b.res_blocks = 2;
                                  b.attention_ds = {};
                                  return b;
                                }()}) {
    UNet net(m);
    int64_t n = 0;
    for (const auto& p : net->parameters()) n += p.numel();
    EXPECT_EQ(n, CountParameters(m));
  }
}

TEST(UNetTest, PerBlockParametersOfTheRealModuleMatchSpec) {
  const UNet& net = DefaultNet();
  const UNetPlan& plan = net->plan();
  std::map<std::string, int64_t> groups;
  int64_t total = 0;
  for (const auto& item : net->named_parameters()) {
    const std::string& name = item.key();
    const int64_t n = item.value().numel();
    total += n;
    std::string group;
    if (name.rfind("t.", 0) == 0) {
      group = "time MLP";
    } else if (name.rfind("I.0.", 0) == 0) {
      group = "input conv";
    } else if (name.rfind("I.", 0) == 0) {
      const int block = std::stoi(name.substr(2));
      group = "enc L" + std::to_string(plan.input_blocks[block].level);
    } else if (name.rfind("M.", 0) == 0) {
      group = "middle";
    } else if (name.rfind("O.", 0) == 0) {
      const int block = std::stoi(name.substr(2));
      group = "dec L" + std::to_string(plan.output_blocks[block].level);
    } else if (name.rfind("f.", 0) == 0) {
      group = "head";
    }
    groups[group] += n;
  }
  EXPECT_EQ(total, 40226433);
  const std::map<std::string, int64_t> spec = {
      {"time MLP", 82432},  {"input conv", 5248}, {"enc L0", 348672},  {"enc L1", 348672},
      {"enc L2", 1147904},  {"enc L3", 2878144},  {"enc L4", 3213184}, {"middle", 7476224},
      {"dec L4", 12326016}, {"dec L3", 7514304},  {"dec L2", 3230336}, {"dec L1", 939456},
      {"dec L0", 713984},   {"head", 1857}};
  EXPECT_EQ(groups, spec);
}

TEST(UNetTest, ParameterNamesAndOrderAreThePeers) {
  const UNet& net = DefaultNet();
  std::vector<std::string> names;
  for (const auto& item : net->named_parameters()) names.push_back(item.key());
  ASSERT_EQ(names.size(), 246u);  // the peer's state_dict has 246 tensors
  EXPECT_THAT(
      std::vector<std::string>(names.begin(), names.begin() + 18),
      ElementsAre("t.0.weight", "t.0.bias", "t.2.weight", "t.2.bias", "I.0.0.c.weight", "I.0.0.c.bias",
                  "I.1.0.a.0.weight", "I.1.0.a.0.bias", "I.1.0.a.2.weight", "I.1.0.a.2.bias",
                  "I.1.0.e.weight", "I.1.0.e.bias", "I.1.0.b.0.weight", "I.1.0.b.0.bias", "I.1.0.b.2.weight",
                  "I.1.0.b.2.bias", "I.2.0.c.weight", "I.2.0.c.bias"));
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  EXPECT_TRUE(has("I.5.0.k.weight"));   // 64 -> 128 needs the 1x1 skip
  EXPECT_FALSE(has("I.3.0.k.weight"));  // 64 -> 64 does not
  EXPECT_TRUE(has("I.7.1.q.weight"));   // encoder attention at 16^3
  EXPECT_TRUE(has("M.1.p.bias"));
  EXPECT_TRUE(has("O.3.2.c.weight"));  // ResBlock, attention, upsample conv
  EXPECT_EQ(names.back(), "f.2.bias");
}

TEST(UNetTest, OneForwardIssuesTheSpecOpCounts) {
  UNet& net = DefaultNet();
  const torch::Tensor x = RandomInput(3, 16, 16, 16, 1);
  const torch::Tensor t = torch::tensor({17}, torch::kLong);
  torch::NoGradGuard no_grad;
  OpCounter counter;
  const torch::Tensor y = net->forward(x, t);
  EXPECT_EQ(counter.counts["aten::conv3d"], 57);
  EXPECT_EQ(counter.counts["aten::group_norm"], 39);
  EXPECT_EQ(counter.counts["aten::cat"], 10);
  EXPECT_EQ(counter.counts["aten::upsample_trilinear3d"], 4);
  EXPECT_EQ(counter.counts["aten::addmm"], 19);  // Linear: 2 time MLP + 17 embedding projections
  EXPECT_EQ(counter.counts["aten::silu"], 53);
  EXPECT_EQ(counter.counts["aten::softmax"], 4);
}

TEST(UNetTest, TimestepEmbeddingFollowsTheFormula) {
  const torch::Tensor t = torch::tensor({0, 1, 17, 249}, torch::kLong);
  const torch::Tensor emb = TimestepEmbedding(t, 64);
  ASSERT_EQ(emb.sizes(), (std::vector<int64_t>{4, 64}));
  ASSERT_EQ(emb.scalar_type(), torch::kFloat);
  const auto a = emb.accessor<float, 2>();
  const int64_t steps[] = {0, 1, 17, 249};
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 32; ++i) {
      const double arg = steps[r] * std::exp(-std::log(1000.0) * i / 32);
      EXPECT_NEAR(a[r][i], std::cos(arg), 5e-5) << "t " << steps[r] << " i " << i;
      EXPECT_NEAR(a[r][32 + i], std::sin(arg), 5e-5) << "t " << steps[r] << " i " << i;
    }
  }
  // Odd widths end with a zero column (guided-diffusion's padding).
  const torch::Tensor odd = TimestepEmbedding(torch::tensor({5}, torch::kLong), 5);
  EXPECT_EQ(odd[0][4].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(odd[0][0].item<float>(), static_cast<float>(std::cos(5.0)));
}

TEST(UNetTest, NonCubicVolumeGivesTheInputShapeAndZeroAtInit) {
  ModelOptions m = TinyModel();
  m.channel_mult = {1, 2, 2};
  UNet net(m);
  net->InitWeights(0, InitMode::kReference);
  const torch::Tensor x = RandomInput(3, 16, 24, 32, 2);
  const torch::Tensor y = net->forward(x, torch::tensor({100}, torch::kLong));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{1, 1, 16, 24, 32}));
  // The head conv is zero-initialised: the untrained model predicts exactly 0.
  EXPECT_EQ(y.abs().max().item<float>(), 0.0f);
}

TEST(UNetTest, ZeroInitLayersAndDefaultRanges) {
  UNet net(TinyModel());
  net->InitWeights(5, InitMode::kReference);
  for (const auto& item : net->named_parameters()) {
    const std::string& n = item.key();
    const torch::Tensor& p = item.value();
    const bool zero =
        n.find(".b.2.") != std::string::npos || n.find(".p.") != std::string::npos || n.rfind("f.2.", 0) == 0;
    if (zero) {
      EXPECT_EQ(p.abs().max().item<float>(), 0.0f) << n;
    } else if (n.find(".0.weight") != std::string::npos && p.dim() == 1) {
      EXPECT_EQ(p.min().item<float>(), 1.0f) << n;  // GroupNorm weight
    } else if (p.dim() >= 2) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(p.numel() / p.size(0)));
      EXPECT_LE(p.abs().max().item<float>(), bound) << n;
      EXPECT_GT(p.abs().max().item<float>(), 0.5 * bound) << n;
    }
  }
  // The initial weights come from our generator: the same bytes on every LibTorch version.
  std::vector<float> all;
  for (const auto& p : net->parameters()) {
    const torch::Tensor c = p.detach().contiguous();
    all.insert(all.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(CountParameters(TinyModel())));
  EXPECT_EQ(Fnv1a64(all), 0x3395bc25eca9f169ull) << std::hex << Fnv1a64(all);
  // Same seed, same weights; another seed, other weights.
  UNet again(TinyModel()), other(TinyModel());
  again->InitWeights(5, InitMode::kReference);
  other->InitWeights(6, InitMode::kReference);
  EXPECT_TRUE(torch::equal(net->parameters()[0], again->parameters()[0]));
  EXPECT_FALSE(torch::equal(net->parameters()[0], other->parameters()[0]));
}

TEST(UNetTest, ChannelsLastKeepsTheLayoutAndTheFunction) {
  UNet net(TinyModel());
  net->InitWeights(1, InitMode::kDense);
  const torch::Tensor x = RandomInput(3, 16, 16, 16, 3);
  const torch::Tensor t = torch::tensor({42}, torch::kLong);
  torch::NoGradGuard no_grad;
  const torch::Tensor ref = net->forward(x, t);
  net->SetChannelsLast(true);
  const torch::Tensor y = net->forward(x, t);
  EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast3d));
  for (const auto& p : net->parameters()) {
    if (p.dim() == 5 && p.size(1) > 1) EXPECT_TRUE(p.is_contiguous(at::MemoryFormat::ChannelsLast3d));
  }
  EXPECT_LT(((y - ref).norm() / ref.norm()).item<double>(), 1e-5);
}

TEST(UNetTest, Bf16AutocastRunsLowPrecisionConvsNearTheFp32Result) {
  UNet net(TinyModel());
  net->InitWeights(1, InitMode::kDense);
  const torch::Tensor x = RandomInput(3, 16, 16, 16, 4);
  const torch::Tensor t = torch::tensor({42}, torch::kLong);
  torch::NoGradGuard no_grad;
  const torch::Tensor ref = net->forward(x, t);
  torch::Tensor y;
  {
    compat::AutocastGuard autocast(c10::DeviceType::CPU, true, at::kBFloat16);
    EXPECT_TRUE(compat::AutocastGuard::IsEnabled(c10::DeviceType::CPU));
    y = net->forward(x, t);
  }
  EXPECT_FALSE(compat::AutocastGuard::IsEnabled(c10::DeviceType::CPU));
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  // BF16 keeps 8 significant bits (unit roundoff 2^-9); a rounding at every conv and linear of the
  // tiny U-Net adds up to a few percent, by an amount that depends on the CPU's oneDNN path. An
  // FP32 run would differ by ~1e-7 and a broken cast by ~1: both fall outside.
  const double rel = ((y.to(torch::kFloat) - ref).norm() / ref.norm()).item<double>();
  EXPECT_GT(rel, 1e-3);
  EXPECT_LT(rel, 1e-1);
}

// ---------------------------------------------------------------- fused GroupNorm on the CPU
// The fused kernels run on CUDA only (their numerics are checked on the GPU machine,
// tests/gpu/fused_group_norm_test.cc); here: the fallback is exactly the unfused model, the
// refusal reasons name the cause, and the op counts its calls.

TEST(FusedGroupNormTest, FallbackOnTheCpuIsTheReferenceAndSaysWhy) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({2, 8, 3, 5, 7});
  const torch::Tensor emb = torch::randn({2, 8});
  const torch::Tensor gamma = torch::rand({8}) + 0.5, beta = torch::randn({8});
  EXPECT_THAT(fused::FusedUnavailable(x, 4), fused::Compiled() ? HasSubstr("input on cpu") : HasSubstr("LibTorch"));
  const fused::CallCounts before = fused::Counts();
  const torch::Tensor y = fused::GroupNormAct(x, emb, 4, gamma, beta, 1e-5, /*silu=*/true, /*fused=*/true);
  const torch::Tensor expected =
      at::silu(at::group_norm(x + emb.view({2, 8, 1, 1, 1}), 4, gamma, beta, 1e-5));
  EXPECT_TRUE(torch::equal(y, expected));
  const torch::Tensor plain = fused::GroupNormAct(x, torch::Tensor(), 4, gamma, beta, 1e-5, /*silu=*/false, true);
  EXPECT_TRUE(torch::equal(plain, at::group_norm(x, 4, gamma, beta, 1e-5)));
  const fused::CallCounts after = fused::Counts();
  EXPECT_EQ(after.fallback - before.fallback, 2);
  EXPECT_EQ(after.fused, before.fused);
  EXPECT_FALSE(after.last_fallback_reason.empty());
  // Not asked for: no count.
  fused::GroupNormAct(x, emb, 4, gamma, beta, 1e-5, true, /*fused=*/false);
  EXPECT_EQ(fused::Counts().fallback, after.fallback);
}

// The upsample and head-conv ops (fused_volume_ops.h) on the CPU: LibTorch's ops exactly, each
// call counted as a fallback with its reason; not asked for, not counted.
TEST(FusedGroupNormTest, VolumeOpsFallBackOnTheCpuAndSayWhy) {
  torch::manual_seed(9);
  const torch::Tensor x = torch::randn({2, 8, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast3d);
  const torch::Tensor w = torch::randn({1, 8, 3, 3, 3}), b = torch::randn({1});
  EXPECT_THAT(fused::UpsampleUnavailable(x), fused::Compiled() ? HasSubstr("input on cpu") : HasSubstr("LibTorch"));
  EXPECT_THAT(fused::SmallConvUnavailable(x, w, b),
              fused::Compiled() ? HasSubstr("input on cpu") : HasSubstr("LibTorch"));
  const fused::CallCounts up0 = fused::Counts(fused::Op::kUpsample), conv0 = fused::Counts(fused::Op::kSmallConv);
  EXPECT_TRUE(torch::equal(fused::UpsampleTrilinearX2(x, /*fused=*/true),
                           at::upsample_trilinear3d(x, {6, 8, 10}, /*align_corners=*/false)));
  EXPECT_TRUE(torch::equal(fused::SmallConv3x3(x, w, b, /*fused=*/true), at::conv3d(x, w, b, 1, 1)));
  EXPECT_EQ(fused::Counts(fused::Op::kUpsample).fallback - up0.fallback, 1);
  EXPECT_EQ(fused::Counts(fused::Op::kSmallConv).fallback - conv0.fallback, 1);
  EXPECT_FALSE(fused::Counts(fused::Op::kSmallConv).last_fallback_reason.empty());
  fused::UpsampleTrilinearX2(x, /*fused=*/false);
  fused::SmallConv3x3(x, w, b, /*fused=*/false);
  EXPECT_EQ(fused::Counts(fused::Op::kUpsample).fallback - up0.fallback, 1);
  EXPECT_EQ(fused::Counts(fused::Op::kSmallConv).fallback - conv0.fallback, 1);
  EXPECT_STREQ(fused::OpName(fused::Op::kSmallConv), "head conv");
}

// The foreach Adam is torch::optim::Adam's arithmetic: the same parameters, bit for bit, after
// several steps (one parameter without a gradient on one step, which neither moves).
TEST(ForeachAdamTest, MatchesLibTorchAdamBitForBit) {
  torch::manual_seed(3);
  std::vector<torch::Tensor> a = {torch::randn({4, 3}), torch::randn({7}), torch::randn({2, 2, 3})};
  std::vector<torch::Tensor> b;
  for (auto& t : a) {
    t.set_requires_grad(true);
    b.push_back(t.detach().clone().set_requires_grad(true));
  }
  ForeachAdam mine(a, 1e-2, 0.9, 0.999, 1e-8);
  torch::optim::Adam theirs(b, torch::optim::AdamOptions(1e-2).betas(std::make_tuple(0.9, 0.999)).eps(1e-8));
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < a.size(); ++i) {
      a[i].mutable_grad() = torch::Tensor();
      b[i].mutable_grad() = torch::Tensor();
      if (step == 2 && i == 1) continue;  // no gradient this step
      const torch::Tensor g = torch::randn(a[i].sizes());
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    mine.Step();
    theirs.step();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "step " << step << " tensor " << i;
  }
  EXPECT_EQ(mine.steps(), 5);
}

TEST(FusedGroupNormTest, ParameterRefusalsNameTheParameter) {
  const torch::Tensor x = torch::randn({2, 8, 4});
  const torch::Tensor g = torch::ones({8}), b = torch::zeros({8});
  EXPECT_EQ(fused::ParamsUnavailable(x, torch::Tensor(), g, b), "");
  EXPECT_EQ(fused::ParamsUnavailable(x, torch::randn({2, 8}), g, b), "");
  EXPECT_THAT(fused::ParamsUnavailable(x, torch::Tensor(), torch::Tensor(), b), HasSubstr("gamma is undefined"));
  EXPECT_THAT(fused::ParamsUnavailable(x, torch::Tensor(), g, torch::zeros({6})),
              HasSubstr("beta has 6 elements, expected 8"));
  EXPECT_THAT(fused::ParamsUnavailable(x, torch::randn({1, 8}), g, b), HasSubstr("emb has 8 elements, expected 16"));
  EXPECT_THAT(fused::ParamsUnavailable(x, torch::Tensor(), torch::ones({8}, torch::kLong), b),
              HasSubstr("gamma dtype Long"));
  // The op falls back (and still computes) when a parameter does not fit the kernels.
  const torch::Tensor y = fused::GroupNormAct(x, torch::Tensor(), 4, g, b, 1e-5, false, /*fused=*/true);
  EXPECT_TRUE(torch::equal(y, at::group_norm(x, 4, g, b, 1e-5)));
}

TEST(FusedGroupNormTest, FusedModelOnTheCpuIsBitIdenticalToTheUnfusedOne) {
  UNet net(TinyModel());
  net->InitWeights(1, InitMode::kDense);
  const torch::Tensor x = RandomInput(3, 16, 16, 16, 6);
  const torch::Tensor t = torch::tensor({42}, torch::kLong);
  torch::Tensor ref;
  int group_norms = 0;
  {
    OpCounter counter;
    ref = net->forward(x, t);
    group_norms = counter.counts["aten::group_norm"];
  }
  ASSERT_GT(group_norms, 0);
  ref.sum().backward();
  std::vector<torch::Tensor> ref_grads;
  for (const auto& p : net->parameters()) {
    ref_grads.push_back(p.grad().clone());
    p.mutable_grad() = torch::Tensor();
  }
  net->SetFused(true);
  EXPECT_TRUE(net->fused());
  const int64_t calls = fused::Counts().fallback;
  const torch::Tensor y = net->forward(x, t);
  // Every GroupNorm of the tiny model went through the op (and fell back on the CPU).
  EXPECT_EQ(fused::Counts().fallback - calls, group_norms);
  EXPECT_TRUE(torch::equal(y, ref));
  y.sum().backward();
  size_t i = 0;
  for (const auto& p : net->parameters()) EXPECT_TRUE(torch::equal(p.grad(), ref_grads[i++]));
}

// Forward-only fused runs hold conv and linear parameters in BF16 (UNet::HoldWeightsIn): every
// one of them is cast, GroupNorm's stay FP32, layouts are kept, and under BF16 autocast the
// model computes what it computed with FP32 weights (autocast cast them to the same values).
TEST(UNetTest, HoldWeightsInCastsConvAndLinearParametersOnly) {
  UNet net(TinyModel());
  net->InitWeights(2, InitMode::kDense);
  net->SetChannelsLast(true);
  const torch::Tensor x = RandomInput(3, 16, 16, 16, 8).contiguous(at::MemoryFormat::ChannelsLast3d);
  const torch::Tensor t = torch::tensor({7}, torch::kLong);
  torch::NoGradGuard no_grad;
  torch::Tensor before;
  {
    compat::AutocastGuard autocast(c10::DeviceType::CPU, true, at::kBFloat16);
    before = net->forward(x, t);
  }
  int affine = 0, norms = 0;
  for (const auto& m : net->modules(/*include_self=*/false)) {
    const int n = static_cast<int>(m->parameters(/*recurse=*/false).size());
    if (m->as<torch::nn::GroupNormImpl>() != nullptr) {
      norms += n;
    } else {
      affine += n;
    }
  }
  ASSERT_GT(norms, 0);
  EXPECT_EQ(net->HoldWeightsIn(at::kBFloat16), affine);
  EXPECT_EQ(net->HoldWeightsIn(at::kBFloat16), 0) << "already cast";
  for (const auto& m : net->modules(/*include_self=*/false)) {
    const bool norm = m->as<torch::nn::GroupNormImpl>() != nullptr;
    for (const torch::Tensor& p : m->parameters(/*recurse=*/false)) {
      EXPECT_EQ(p.scalar_type(), norm ? at::kFloat : at::kBFloat16) << m->name();
      if (p.dim() == 5) EXPECT_TRUE(p.is_contiguous(at::MemoryFormat::ChannelsLast3d)) << m->name();
    }
  }
  torch::Tensor after;
  {
    compat::AutocastGuard autocast(c10::DeviceType::CPU, true, at::kBFloat16);
    after = net->forward(x, t);
  }
  EXPECT_TRUE(torch::equal(after, before));
}

TEST(CompatTest, OutOfMemoryMessagesAreRecognised) {
  EXPECT_TRUE(compat::IsOutOfMemory("CUDA out of memory. Tried to allocate 2.00 GiB"));
  EXPECT_TRUE(compat::IsOutOfMemory(
      "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory"));
  EXPECT_FALSE(compat::IsOutOfMemory("Expected all tensors to be on the same device"));
}

// ---------------------------------------------------------------- the workload

struct Event {
  std::string what;
  int index = -1;
  bool measured = false;
};

class RecordingObserver : public PhaseObserver {
 public:
  void OnStepBegin(int index, bool measured) override { events.push_back({"step", index, measured}); }
  void OnStepEnd(const StepReport& r) override { reports.push_back(r); }
  void OnPhaseBegin(std::string_view name) override { events.push_back({"begin " + std::string(name)}); }
  void OnPhaseEnd(std::string_view name) override { events.push_back({"end " + std::string(name)}); }
  std::vector<Event> events;
  std::vector<StepReport> reports;
  std::vector<double> Losses() const {
    std::vector<double> l;
    for (const StepReport& r : reports) l.push_back(r.loss);
    return l;
  }
};

TEST(WorkloadTest, ForwardStepsAreBracketedAndWarmupIsUnmeasured) {
  WorkloadOptions o = TinyOptions(Phase::kForward);
  o.warmup = 2;
  o.steps = 3;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto w, Workload::Create(o));
  EXPECT_EQ(w->ParameterCount(), CountParameters(o.model));
  RecordingObserver obs;
  ASSERT_THAT(w->Run(&obs), IsOk());
  ASSERT_EQ(obs.reports.size(), 5u);
  const std::vector<std::pair<int, bool>> expected = {
      {0, false}, {1, false}, {0, true}, {1, true}, {2, true}};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(obs.reports[i].index, expected[i].first);
    EXPECT_EQ(obs.reports[i].measured, expected[i].second);
    EXPECT_GT(obs.reports[i].wall_ns, 0);
    EXPECT_EQ(obs.reports[i].device_ns, 0);  // CPU
    ASSERT_EQ(obs.reports[i].phase_ns.count("fwd"), 1u);
    EXPECT_GT(obs.reports[i].phase_ns.at("fwd"), 0);
    EXPECT_LE(obs.reports[i].phase_ns.at("fwd"), obs.reports[i].wall_ns);
  }
  ASSERT_EQ(obs.events.size(), 15u);
  EXPECT_EQ(obs.events[0].what, "step");
  EXPECT_EQ(obs.events[1].what, "begin fwd");
  EXPECT_EQ(obs.events[2].what, "end fwd");
  EXPECT_GT(w->PeakMemoryBytes(), 0u);
}

TEST(WorkloadTest, TrainStepsRunFwdBwdAndOptimEveryGradAccumSteps) {
  WorkloadOptions o = TinyOptions(Phase::kTrain);
  o.warmup = 0;
  o.steps = 4;
  o.grad_accum = 2;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto w, Workload::Create(o));
  RecordingObserver obs;
  ASSERT_THAT(w->Run(&obs), IsOk());
  std::vector<std::string> phases;
  for (const Event& e : obs.events) phases.push_back(e.what);
  EXPECT_THAT(
      phases,
      ElementsAre("step", "begin fwd", "end fwd", "begin bwd", "end bwd",                              //
                  "step", "begin fwd", "end fwd", "begin bwd", "end bwd", "begin optim", "end optim",  //
                  "step", "begin fwd", "end fwd", "begin bwd", "end bwd",                              //
                  "step", "begin fwd", "end fwd", "begin bwd", "end bwd", "begin optim", "end optim"));
  for (const StepReport& r : obs.reports) {
    EXPECT_TRUE(std::isfinite(r.loss));
    EXPECT_GT(r.loss, 0.0);
  }
  EXPECT_EQ(obs.reports[1].phase_ns.count("optim"), 1u);
  EXPECT_EQ(obs.reports[2].phase_ns.count("optim"), 0u);
}

TEST(WorkloadTest, OverfitsOneFixedSample) {
  // One fixed subject, t and eps; a raised learning rate. Runs in chunks of 20 steps and stops
  // as soon as the loss has halved (at most 200 steps), to stay fast on reference BLAS.
  WorkloadOptions o = TinyOptions(Phase::kTrain);
  o.depth = o.height = o.width = 8;
  o.warmup = 0;
  o.steps = 20;
  o.grad_accum = 1;
  o.learning_rate = 3e-3;
  o.fixed_noise = true;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto w, Workload::Create(o));
  std::vector<double> l;
  while (l.size() < 200 && (l.empty() || l.back() >= 0.5 * l.front())) {
    RecordingObserver obs;
    ASSERT_THAT(w->Run(&obs), IsOk());
    for (double v : obs.Losses()) l.push_back(v);
  }
  // Untrained: the prediction is 0, so the L1 loss is mean |eps| ~ sqrt(2/pi) = 0.8.
  EXPECT_NEAR(l.front(), 0.80, 0.08);
  EXPECT_LT(l.back(), 0.5 * l.front())
      << "after " << l.size() << " steps: first " << l.front() << " last " << l.back();
  std::cerr << "overfit: " << l.front() << " -> " << l.back() << " in " << l.size() << " steps\n";
}

TEST(WorkloadTest, TwoCpuRunsWithOneSeedGiveBitIdenticalLosses) {
  auto losses = [](uint64_t seed) {
    WorkloadOptions o = TinyOptions(Phase::kTrain);
    o.seed = seed;
    o.warmup = 0;
    o.steps = 4;
    o.grad_accum = 1;
    o.learning_rate = 1e-3;
    auto w = Workload::Create(o);
    EXPECT_THAT(w, IsOk());
    RecordingObserver obs;
    EXPECT_THAT((*w)->Run(&obs), IsOk());
    return obs.Losses();
  };
  const std::vector<double> a = losses(11), b = losses(11), c = losses(12);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b);  // exact
  EXPECT_NE(a, c);
  EXPECT_NE(a[0], a[3]);  // fresh t and eps every step
}

TEST(WorkloadTest, SamplingRunsTheChainToAVolumeInRange) {
  WorkloadOptions o = TinyOptions(Phase::kSample);
  o.sample_steps = 5;
  o.warmup = 0;
  o.steps = 5;  // t = 4, 3, 2, 1, 0
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto w, Workload::Create(o));
  EXPECT_THAT(w->CurrentSample().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("has not taken a sampling step")));
  RecordingObserver obs;
  ASSERT_THAT(w->Run(&obs), IsOk());
  ASSERT_EQ(obs.reports.size(), 5u);
  EXPECT_EQ(obs.reports[0].phase_ns.count("sample_step"), 1u);
  MEDPROF_ASSERT_OK_AND_ASSIGN(const std::vector<float> x, w->CurrentSample());
  ASSERT_EQ(x.size(), 8u * 8 * 8);
  float lo = 2, hi = -2;
  for (float v : x) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -1.0f);
  EXPECT_LE(hi, 1.0f);
  EXPECT_LT(lo, hi);
  // Other phases have no chain.
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto f, Workload::Create(TinyOptions(Phase::kForward)));
  EXPECT_THAT(f->CurrentSample().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not sample")));
}

TEST(WorkloadTest, FlagsAreReadBackFromLibTorch) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto base, Workload::Create(TinyOptions(Phase::kForward)));
  EXPECT_FALSE(base->flags().tf32_cudnn);
  EXPECT_FALSE(base->flags().tf32_matmul);
  EXPECT_FALSE(base->flags().cudnn_benchmark);
  EXPECT_FALSE(base->flags().channels_last);
  EXPECT_EQ(base->flags().device, "cpu");
  EXPECT_EQ(base->flags().torch_version, compat::TorchVersion());
  EXPECT_EQ(base->flags().note, "");

  WorkloadOptions o = TinyOptions(Phase::kForward);
  o.tf32 = true;
  o.channels_last = true;
  o.fused = true;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto w, Workload::Create(o));
  EXPECT_TRUE(w->flags().tf32_cudnn);
  EXPECT_TRUE(w->flags().tf32_matmul);
  EXPECT_TRUE(at::globalContext().allowTF32CuDNN());
  EXPECT_TRUE(w->flags().channels_last);
  EXPECT_FALSE(w->flags().fused);
  EXPECT_THAT(w->flags().note, HasSubstr("fused GroupNorm"));
  EXPECT_THAT(w->flags().note, HasSubstr("tf32 has no effect on CPU"));
  ASSERT_THAT(w->Run(nullptr), IsOk());
  // The next workload turns TF32 off explicitly again.
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto again, Workload::Create(TinyOptions(Phase::kForward)));
  EXPECT_FALSE(at::globalContext().allowTF32CuDNN());
  EXPECT_FALSE(at::globalContext().allowTF32CuBLAS());
}

TEST(WorkloadTest, Bf16TrainingRunsOnCpu) {
  WorkloadOptions o = TinyOptions(Phase::kTrain);
  o.bf16 = true;
  o.grad_accum = 1;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto w, Workload::Create(o));
  EXPECT_TRUE(w->flags().bf16);
  RecordingObserver obs;
  ASSERT_THAT(w->Run(&obs), IsOk());
  for (const StepReport& r : obs.reports) EXPECT_TRUE(std::isfinite(r.loss));
}

TEST(WorkloadTest, RefusesBadOptionsAndMissingDevices) {
  WorkloadOptions o = TinyOptions(Phase::kForward);
  o.width = 17;
  EXPECT_THAT(Workload::Create(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("width: 17")));
  if (!torch::cuda::is_available()) {
    o = TinyOptions(Phase::kForward);
    o.device = Device::kCuda;
    EXPECT_THAT(Workload::Create(o).status(),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("device: cuda")));
  }
}

TEST(WorkloadTest, ExportForPeerWritesTheCheckFiles) {
  const std::string dir = ::testing::TempDir() + "/meddpm_export";
  WorkloadOptions o = TinyOptions(Phase::kTrain);
  o.tf32 = true;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto tf32, Workload::Create(o));
  EXPECT_THAT(tf32->ExportForPeer(dir),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("strict FP32")));
  o.tf32 = false;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto w, Workload::Create(o));
  RecordingObserver before;
  ASSERT_THAT(w->Run(&before), IsOk());
  ASSERT_THAT(w->ExportForPeer(dir), IsOk());
  const int64_t params = CountParameters(o.model);
  EXPECT_EQ(std::filesystem::file_size(dir + "/weights.bin"), static_cast<uintmax_t>(params) * 4);
  EXPECT_EQ(std::filesystem::file_size(dir + "/input.bin"), 3u * 8 * 8 * 8 * 4);
  EXPECT_EQ(std::filesystem::file_size(dir + "/output.bin"), 8u * 8 * 8 * 4);
  std::ifstream manifest(dir + "/manifest.json");
  const std::string text((std::istreambuf_iterator<char>(manifest)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("\"name\": \"t.0.weight\", \"shape\": [32, 8], \"offset\": 0"));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\"parameter_count\": ", params)));
  // The model's own weights are restored: training goes on from where it was.
  WorkloadOptions same = o;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto twin, Workload::Create(same));
  RecordingObserver twin_before, after, twin_after;
  ASSERT_THAT(twin->Run(&twin_before), IsOk());
  ASSERT_THAT(w->Run(&after), IsOk());
  ASSERT_THAT(twin->Run(&twin_after), IsOk());
  EXPECT_EQ(after.Losses(), twin_after.Losses());
}

}  // namespace
}  // namespace medprof::meddpm
