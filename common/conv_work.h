// The useful work of a convolution op, from the op name and the input shapes the trace records for
// it (agent/profiler/shape_table.h: "f32[1,64,128,128,128]cl f32[64,64,3,3,3] [1,1,1] [1,1,1]
// [1,1,1] 1 false false true"): 2 · N · C_out · (C_in / groups) · Π k · Π out, the multiply-adds
// the mathematics needs. A GEMM-based kernel may execute more — it pads a channel count below its
// tile — and the findings compare the two (findings.h, rule tensor_padding).
//
//   aten::cudnn_convolution(input [N, C_in, D, H, W], weight [C_out, C_in/g, kD, kH, kW],
//                           padding, stride, dilation, groups, ...):
//       out_i = (in_i + 2 pad_i − dil_i (k_i − 1) − 1) / stride_i + 1
//   aten::convolution_backward(grad_output [N, C_out, oD, oH, oW], input, weight, ...): each of its
//       data- and weight-gradient kernels does the forward's work, read off grad_output and weight.
//
// Any other op, or shapes that do not parse as above: nullopt. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace medprof {

struct ConvWork {
  double flops = 0;            // 2 · N · C_out · C_in/g · Π k · Π out
  int64_t c_in_per_group = 0;  // weight dim 1
  int64_t c_out = 0;           // weight dim 0
  std::vector<int64_t> kernel;  // the spatial kernel sizes
};

std::optional<ConvWork> UsefulConvWork(std::string_view op, std::string_view shapes);

}  // namespace medprof
