// The per-chip datasheet table (common/chip_datasheet.h): CUDA device names as the runtime reports
// them map to the right form factor, unknown GPUs get no numbers, and FillDatasheet sets
// Ceiling.datasheet beside a measured value without touching it.
#include "common/chip_datasheet.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::roofline {
namespace {

std::string ModelOf(std::string_view name) {
  const ChipDatasheet* s = FindDatasheet(name);
  return s == nullptr ? "none" : s->model;
}

TEST(ChipDatasheet, DeviceNamesPickTheirFormFactor) {
  EXPECT_EQ(ModelOf("NVIDIA H200"), "H200 SXM");
  EXPECT_EQ(ModelOf("NVIDIA H200 NVL"), "H200 NVL");
  EXPECT_EQ(ModelOf("NVIDIA H100 80GB HBM3"), "H100 SXM5");
  EXPECT_EQ(ModelOf("NVIDIA H100 PCIe"), "H100 PCIe");
  EXPECT_EQ(ModelOf("NVIDIA H100 NVL"), "H100 NVL");
  EXPECT_EQ(ModelOf("NVIDIA A100-SXM4-40GB"), "A100 40GB");
  EXPECT_EQ(ModelOf("NVIDIA A100-PCIE-40GB"), "A100 40GB");
  EXPECT_EQ(ModelOf("NVIDIA A100-SXM4-80GB"), "A100 SXM4 80GB");
  EXPECT_EQ(ModelOf("NVIDIA A100 80GB PCIe"), "A100 PCIe 80GB");
  EXPECT_EQ(ModelOf("Tesla V100-SXM2-32GB"), "V100 SXM2");
  EXPECT_EQ(ModelOf("Tesla V100-PCIE-16GB"), "V100 PCIe");
  EXPECT_EQ(ModelOf("Tesla V100S-PCIE-32GB"), "V100S PCIe");
  EXPECT_EQ(ModelOf("NVIDIA GeForce RTX 4090"), "none");
  EXPECT_EQ(ModelOf("cpu"), "none");
}

TEST(ChipDatasheet, PeaksAreTheDensePublishedOnes) {
  const ChipDatasheet* h200 = FindDatasheet("NVIDIA H200");
  ASSERT_NE(h200, nullptr);
  EXPECT_DOUBLE_EQ(h200->peaks.at("dram"), 4.8e12);
  EXPECT_DOUBLE_EQ(h200->peaks.at("tensor_tf32"), 494.7e12);  // 989 TFLOP/s with sparsity, halved
  EXPECT_DOUBLE_EQ(h200->peaks.at("tensor_fp8"), 1978.9e12);
  const ChipDatasheet* a100 = FindDatasheet("NVIDIA A100-SXM4-80GB");
  ASSERT_NE(a100, nullptr);
  EXPECT_DOUBLE_EQ(a100->peaks.at("tensor_tf32"), 156e12);
  EXPECT_DOUBLE_EQ(a100->peaks.at("dram"), 2.039e12);
  EXPECT_FALSE(a100->peaks.count("tensor_fp8"));
  const ChipDatasheet* v100 = FindDatasheet("Tesla V100-SXM2-16GB");
  ASSERT_NE(v100, nullptr);
  EXPECT_DOUBLE_EQ(v100->peaks.at("fp16"), 31.4e12);
  EXPECT_FALSE(v100->peaks.count("tensor_tf32"));
  // Every model has the roofs the study's presets need on it.
  for (const char* name : {"NVIDIA H200", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA A100 80GB PCIe",
                           "Tesla V100S-PCIE-32GB"}) {
    const ChipDatasheet* s = FindDatasheet(name);
    ASSERT_NE(s, nullptr) << name;
    for (const char* roof : {"dram", "fp32", "fp64", "tensor_fp16"}) EXPECT_GT(s->peaks.count(roof), 0u) << name << " " << roof;
    EXPECT_FALSE(s->source.empty());
  }
}

TEST(ChipDatasheet, FillSetsTheDatasheetBesideTheMeasuredValue) {
  v1::Ceilings c;
  v1::Ceiling* dram = c.add_ceilings();
  dram->set_name("dram");
  dram->set_measured(4.1e12);
  dram->set_method("copy");
  ASSERT_TRUE(FillDatasheet("NVIDIA H200", &c));
  ASSERT_EQ(c.ceilings_size(), 9);
  EXPECT_EQ(c.ceilings(0).name(), "dram");
  EXPECT_DOUBLE_EQ(c.ceilings(0).measured(), 4.1e12);
  EXPECT_DOUBLE_EQ(c.ceilings(0).datasheet(), 4.8e12);
  EXPECT_EQ(c.ceilings(0).method(), "copy");
  for (const v1::Ceiling& x : c.ceilings()) {
    if (x.name() != "dram") EXPECT_EQ(x.measured(), 0) << x.name();
  }
  v1::Ceilings none;
  EXPECT_FALSE(FillDatasheet("NVIDIA GeForce RTX 4090", &none));
  EXPECT_EQ(none.ceilings_size(), 0);
}

}  // namespace
}  // namespace medprof::roofline
