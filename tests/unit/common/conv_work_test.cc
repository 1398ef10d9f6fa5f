#include "common/conv_work.h"

#include <gtest/gtest.h>

namespace medprof {
namespace {

// Med-DDPM's output convolution at 128³, as the H100 trace recorded it: 64 -> 1 channel, 3x3x3,
// padding 1. 2 · 1 · (1 · 64 · 27) · 128³ = 3456 · 2097152 = 7 247 757 312.
TEST(ConvWork, ForwardOutputConvolution) {
  auto c = UsefulConvWork("aten::cudnn_convolution",
                          "f32[1,64,128,128,128]cl f32[1,64,3,3,3]cl [1,1,1] [1,1,1] [1,1,1] 1 false false true");
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->flops, 7247757312.0);
  EXPECT_EQ(c->c_out, 1);
  EXPECT_EQ(c->c_in_per_group, 64);
  EXPECT_EQ(c->kernel, (std::vector<int64_t>{3, 3, 3}));
}

// Stride 2 halves each output side: (128 + 2 − 2 − 1) / 2 + 1 = 64, so 2 · 64 · 64 · 27 · 64³
// = 221184 · 262144 = 57 982 058 496.
TEST(ConvWork, ForwardStrided) {
  auto c = UsefulConvWork("aten::cudnn_convolution",
                          "f32[1,64,128,128,128] f32[64,64,3,3,3] [1,1,1] [2,2,2] [1,1,1] 1 false false true");
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->flops, 57982058496.0);
}

// A 1x1x1 convolution without padding: 2 · 128 · 64 · 128³ = 16384 · 2097152 = 34 359 738 368.
TEST(ConvWork, ForwardPointwise) {
  auto c = UsefulConvWork("aten::cudnn_convolution",
                          "f32[1,128,128,128,128] f32[64,128,1,1,1] [0,0,0] [1,1,1] [1,1,1] 1 false false true");
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->flops, 34359738368.0);
}

// convolution_backward(grad_output, input, weight, bias_sizes, ...), as the opt1 train trace records
// it (with a list that is not integers after the three it needs): the forward's work, read off
// grad_output [1, 64, 32³] and weight [64, 128, 3,3,3]: 2 · 64 · 128 · 27 · 32768 = 14 495 514 624.
TEST(ConvWork, BackwardFromGradOutputAndWeight) {
  auto c = UsefulConvWork("aten::convolution_backward",
                          "f32[1,64,32,32,32] f32[1,128,32,32,32] f32[64,128,3,3,3] [64] [1,1,1] [1,1,1] [1,1,1] "
                          "false [0,0,0] 1 [true,true,true]");
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->flops, 14495514624.0);
  EXPECT_EQ(c->c_out, 64);
}

TEST(ConvWork, OtherOpsAndBadShapesGiveNothing) {
  EXPECT_FALSE(UsefulConvWork("aten::add", "f32[1,64,8,8,8] f32[1,64,8,8,8]").has_value());
  EXPECT_FALSE(UsefulConvWork("aten::cudnn_convolution", "").has_value());
  EXPECT_FALSE(UsefulConvWork("aten::cudnn_convolution", "f32[1,64,8,8,8] f32[64,64,3,3,3]").has_value());
  EXPECT_FALSE(UsefulConvWork("aten::cudnn_convolution",
                              "f32[1,64,8,8,8] f32[64,64,3,3] [1,1,1] [1,1,1] [1,1,1] 1").has_value());
  EXPECT_FALSE(UsefulConvWork("aten::cudnn_convolution",
                              "f32[1,64,8,8,8 f32[64,64,3,3,3] [1,1,1] [1,1,1] [1,1,1] 1").has_value());
  EXPECT_FALSE(UsefulConvWork("aten::cudnn_convolution",
                              "f32[1,64,8,x,8] f32[64,64,3,3,3] [1,1,1] [1,1,1] [1,1,1] 1").has_value());
  EXPECT_FALSE(UsefulConvWork("aten::cudnn_convolution",
                              "f32[1,64,8,8,8] f32[64,64,3,3,3] [1,1,1] [0,1,1] [1,1,1] 1").has_value());
  EXPECT_FALSE(UsefulConvWork("aten::convolution_backward",
                              "f32[1,32,8,8,8] f32[1,64,8,8,8] f32[64,64,3,3,3] [64]").has_value());
}

}  // namespace
}  // namespace medprof
