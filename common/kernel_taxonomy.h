// medprof's kernel taxonomy: which category a GPU kernel (or a LibTorch op) belongs to.
//
// Categories (DESIGN.md "Kernel taxonomy"): conv, gemm, norm, elementwise, layout (NCDHW<->NDHWC
// transforms, padding, tensor transforms, copies made by a memory-format conversion), copy
// (other copies, dtype casts, concatenation, gathers, memcpy), reduction, softmax, optimizer,
// upsample, memset (memset and constant fills), other.
//
// ClassifyKernel(kernel_name, op_name) applies three rules, in order:
//   1. The kernel's NAME says layout conversion, memcpy or memset: that category, whatever op
//      launched it. Layout = the function name (not its arguments) holds a format-to-format
//      transform (nchwToNhwc, nhwcToNchw, ncdhwToNdhwc, nhwcToFoldedNhwc, ...), an
//      add/remove-padding kernel, tensorTransform or convertTensor. A bare "nhwc"/"nchw" is NOT
//      layout: cuDNN convolution names contain them (…_nhwckrsc_nhwc…, …_nhwc2nchw_tn_v1).
//      memcpy anywhere in the name -> copy ("[CUDA memcpy HtoD]", "Memcpy DtoD (Device ->
//      Device)"); memset -> memset.
//   2. Otherwise the LibTorch op decides (see ClassifyOp), when it says something.
//      op_name is the innermost op the kernel ran under, or the op stack, outermost first,
//      joined by " > " ("Optimizer.step#Adam.step > aten::_foreach_mul_"). With a stack:
//        - any op that is `optimizer` (Optimizer.*, aten::_foreach_*, *adam*, *sgd*) makes the
//          kernel `optimizer` (everything under Optimizer.step is optimizer work);
//        - otherwise the innermost op that says something decides, walking outwards;
//        - memory-format conversion: if that op is a copy (aten::copy_, clone, to, _to_copy, ...)
//          or no op says anything, and some op in the stack says it is a format conversion,
//          the kernel is `layout`. An op says so when it is aten::contiguous (it copies only to
//          change strides, i.e. the layout) or when its name carries the target format
//          ("channels_last", "memory_format": e.g. a range the worker pushes around its own
//          conversions). aten::to / _to_copy / copy_ / clone alone are `copy` (dtype casts,
//          device moves and plain copies look the same by name).
//      So GroupNorm's apply/elementwise kernels under aten::native_group_norm are `norm`, and a
//      direct_copy kernel under aten::cat is `copy`.
//   3. Otherwise the kernel NAME decides by family (demangled first when it is mangled, `_Z…`);
//      the first match wins:
//        other       NCCL (nccl*): collectives are not model work ("AllReduce" is no reduction)
//        Triton      triton_poi_* elementwise, triton_red_*/triton_per_* reduction,
//                    triton_for_* optimizer (foreach), triton_tem_* by template (conv / mm)
//        norm        medprof_*group_norm* (our own fused kernels)
//        gemm        fused attention (flash_fwd/bwd, fmha, sdpa, *attention*): tensor-core
//                    matmuls dominate and there is no attention category
//        conv        fprop/dgrad/wgrad, implicit_gemm, *convolve*, winograd, cudnn::cnn::,
//                    cask_cudnn, cuDNN's legacy <arch>_[s|h|i]<mma>cudnn_* names, cuDNN FFT
//                    (fft2d_/fft3d_), im2col/vol2col, any "conv" not followed by 'e' (convert)
//        norm        group/layer/batch/instance/rms norm, RowwiseMoments, *FusedParams,
//                    ComputeInternalGradients, GammaBeta*, cuDNN bn_fw/bn_bw
//        softmax     *softmax*
//        upsample    upsample, interpolat*, grid_sampler
//        optimizer   multi_tensor_apply, fused Adam/SGD functors, lpnorm_cleanup (_foreach_norm)
//        gemm        gemm, gemv, nvjet, cutlass, cublas, splitKreduce, matmul
//        reduction   function name with reduce/reduction/nll_loss, unless it is a backward
//                    kernel (the gradient of a reduction is a broadcast or a scatter) or says
//                    no_reduce (nll_loss with reduction='none' is a per-sample gather)
//        norm        welford (apex SyncBN); after reduction so ATen's WelfordOps reduce_kernel
//                    (var/std) stays a reduction
//        copy/other  gather/scatter/index kernels: copy, or other when they accumulate
//                    (ReduceAdd, ...)
//        copy        direct_copy, *copy_kernel*, CatArrayBatchedCopy, concat, reflection/
//                    replication padding
//        memset      FillFunctor, fill_kernel
//        elementwise elementwise/vectorized/unrolled/functor kernels, pointwise, dropout, cuDNN
//                    activation/add_tensor/scalePackedTensor/op-tensor kernels
//        other       anything else
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
