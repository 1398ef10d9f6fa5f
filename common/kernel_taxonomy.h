// medprof's kernel taxonomy: which category a GPU kernel (or a LibTorch op) belongs to.
//
// Categories: conv, gemm, norm, elementwise, layout, copy, reduction, softmax, optimizer,
// upsample, memset, other. Rules, in order (DESIGN.md "Kernel taxonomy"):
//   1. a kernel whose name says layout conversion (cuDNN nchwToNhwc, nhwcToNchw,
//      nhwcAddPadding, tensorTransform, convertTensor), memcpy or memset is that, whatever
//      op launched it;
//   2. otherwise the LibTorch op it ran under decides (GroupNorm's apply kernel is `norm`);
//   3. with no op (or an op that says nothing), the kernel name decides, by kernel family
//      (cuDNN/cuBLAS/CUTLASS/nvjet/ATen functor names), not by a list of known names.
// cuDNN convolution kernels contain `nhwc`/`nchw` in their names: they are `conv`.
//
// No LibTorch or CUDA dependency: the worker, the server's ncu importer, compare and the CLI
// (`medprof kernels classify`) all use it. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace medprof::taxonomy {

enum class Category {
  kConv, kGemm, kNorm, kElementwise, kLayout, kCopy, kReduction, kSoftmax,
  kOptimizer, kUpsample, kMemset, kOther,
};

// "conv", "gemm", ...; the order of AllCategories() is the order above.
std::string_view CategoryName(Category c);
bool ParseCategory(std::string_view name, Category* out);
const std::vector<Category>& AllCategories();

// Category of a LibTorch op by its RecordFunction name ("aten::conv3d",
// "aten::native_group_norm", "Optimizer.step#Adam.step", ...). kOther when it says nothing.
Category ClassifyOp(std::string_view op_name);

// Category of a kernel by its (demangled or mangled) name and, when known, the innermost
// LibTorch op it ran under ("" = unknown). Implements rules 1-3 above.
Category ClassifyKernel(std::string_view kernel_name, std::string_view op_name = "");

}  // namespace medprof::taxonomy
