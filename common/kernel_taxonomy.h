// medprof's kernel taxonomy: which category a GPU kernel (or a LibTorch op) belongs to.
//
// Categories (DESIGN.md "Kernel taxonomy"): conv, gemm, norm, elementwise, layout (NCDHW<->NDHWC
// transforms, padding, tensor transforms, copies made by a memory-format conversion), copy
// (other copies, dtype casts, concatenation, gathers, memcpy), reduction, softmax, optimizer,
// upsample, memset (memset and constant fills), other.
//
// ClassifyKernel(kernel_name, op_name) applies three rules in order — the kernel name when it
// says layout, memcpy or memset; else the LibTorch op (stack) when it says something; else the
// kernel name by family — written out in full in docs/taxonomy.md, which this code must match.
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
// Exact, lower-case names only; *out is left alone when it returns false.
bool ParseCategory(std::string_view name, Category* out);
const std::vector<Category>& AllCategories();

// Category of a LibTorch op by its RecordFunction name ("aten::conv3d",
// "aten::native_group_norm", "Optimizer.step#Adam.step", "ConvolutionBackward0", ...), or of an
// op stack joined by " > " (rule 2 above). kOther when it says nothing (unknown ops, user
// ranges, composite ops whose kernels differ: aten::mse_loss, aten::index_put_, ...).
//   conv: *conv* ops; norm: *group_norm/layer_norm/batch_norm/instance_norm/rms_norm*;
//   softmax: *softmax*; upsample: *upsample*, *interpolate*, *grid_sampler*;
//   gemm: mm, addmm, bmm, baddbmm, matmul, linear, einsum, mv, dot, *attention*;
//   optimizer: Optimizer.*, _foreach_*, *adam*, *sgd*; layout: contiguous, *channels_last*,
//   *memory_format*; copy: cat, stack, copy_, clone, to, _to_copy, *_copy, index, index_select,
//   gather, embedding, pads, repeat, flip, roll; memset: zero_, zeros, fill_, full, ones;
//   reduction: sum, mean, var, std, prod, amax/amin, max/min, argmax/argmin, norm, logsumexp,
//   nll_loss forward; elementwise: arithmetic, activations and their *_backward, comparisons,
//   where, dropout, random fills (normal_, randn, ...), arange. Autograd nodes
//   ("MmBackward0") map like their forward op, except that a reduction's backward is
//   elementwise (a broadcast).
Category ClassifyOp(std::string_view op_name);

// Category of a kernel by its (demangled or mangled) name and, when known, the LibTorch op (or
// " > "-joined op stack) it ran under ("" = unknown). Implements rules 1-3 above.
Category ClassifyKernel(std::string_view kernel_name, std::string_view op_name = "");

}  // namespace medprof::taxonomy
