// What this build knows about medprof's fused kernels (GroupNorm, upsample, small conv) (preset opt3, --fused), with no
// LibTorch or CUDA include: the worker's --describe lists them on every build and says whether
// this binary can run them.
//
// Thread safety: everything here is immutable after static initialisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace medprof::meddpm::fused {

struct KernelInfo {
  std::string name;  // the CUDA kernel's name (as the profiler sees it, demangled prefix)
  std::string role;  // what it does, one line
};

// Every kernel the fused ops launch (GroupNorm forward + backward in launch order, then the
// upsample and the small conv's backward).
const std::vector<KernelInfo>& Kernels();

// True when the kernels and their LibTorch glue are compiled into this binary (a CUDA toolkit
// and a LibTorch with CUDA at build time).
bool Compiled();

// Why they are not ("" when Compiled()).
std::string NotCompiledReason();

// The ops the fused preset routes through medprof's kernels.
enum class Op {
  kGroupNorm,   // GroupNorm (+ SiLU, + embedding add): fused_group_norm.h
  kUpsample,    // trilinear x2 upsample: fused_volume_ops.h
  kSmallConv,   // the head's kernel-3 conv with few outputs (its backward): fused_volume_ops.h
};
const char* OpName(Op op);  // "GroupNorm", "upsample", "head conv"

// Calls of `op` since the process started: through medprof's kernels, and through LibTorch's
// ops while fused was requested, with the last such fallback's reason. The worker logs them at
// the end of a fused run.
struct CallCounts {
  int64_t fused = 0;
  int64_t fallback = 0;
  std::string last_fallback_reason;
};
CallCounts Counts(Op op = Op::kGroupNorm);
// Called by the glue: one call of `op` went through the kernels (`why_not` empty) or fell back.
void CountCall(Op op, const std::string& why_not);

}  // namespace medprof::meddpm::fused
