// What this build knows about medprof's fused GroupNorm kernels (preset opt3, --fused), with no
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

// Every kernel a fused GroupNorm forward + backward launches, in launch order.
const std::vector<KernelInfo>& Kernels();

// True when the kernels and their LibTorch glue are compiled into this binary (a CUDA toolkit
// and a LibTorch with CUDA at build time).
bool Compiled();

// Why they are not ("" when Compiled()).
std::string NotCompiledReason();

// GroupNorm calls since the process started (fused_group_norm.cc counts them): through the
// fused kernels, and through LibTorch's ops while fused was requested, with the last such
// fallback's reason. The worker logs them at the end of a fused run.
struct CallCounts {
  int64_t fused = 0;
  int64_t fallback = 0;
  std::string last_fallback_reason;
};
CallCounts Counts();

}  // namespace medprof::meddpm::fused
