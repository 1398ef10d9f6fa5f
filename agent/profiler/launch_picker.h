// Which kernel launches the metrics layer profiles under kernel replay.
//
// ChooseSignatures: for each of the top-K kernels by trace time, its launch signatures
// (launch_signature.h) in order of time until they cover `coverage` of the kernel's time or
// `max_signatures` of them are chosen (at least one each).
//
// LaunchPicker: in each step, the first launch of each chosen signature — the same launch of the
// same problem every step — in `launches` steps, so a median over them is over repeats, never over
// problem sizes. The caller runs up to Steps() steps (one spare, for a signature that did not run in
// some step), calling BeginStep before each, and stops early once Complete().
//
// Pure logic, no CUPTI: the launch callback asks Want() at API enter (WantsKernel first: cheap) and
// reports Profiled() after the range was stopped. Not thread-safe (CUPTI callbacks of one thread).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/profiler/launch_signature.h"
#include "medprof/v1/results.pb.h"

namespace medprof::profiler {

struct KernelTarget {
  std::string kernel;
  int64_t total_ns = 0;                            // over all its signatures (measured steps)
  int signatures = 0;                              // how many it has
  std::vector<const v1::KernelSignature*> chosen;  // largest time first; point into the input
};

// Top-K kernels by time, each with its chosen signatures. coverage in (0, 1].
std::vector<KernelTarget> ChooseSignatures(const v1::KernelSignatures& signatures, int top_k, double coverage,
                                           int max_signatures);

LaunchSignature ToLaunchSignature(const v1::KernelSignature& s);

class LaunchPicker {
 public:
  LaunchPicker(const std::vector<LaunchSignature>& targets, size_t launches);

  size_t Steps() const { return launches_ + 1; }
  void BeginStep();
  // True once every target has all its launches (no more steps needed).
  bool Complete() const { return complete_ == ranges_of_.size(); }

  bool WantsKernel(const std::string& kernel) const { return kernels_.count(kernel) > 0; }
  // At a launch's API enter: profile this one?
  bool Want(const LaunchSignature& s) const;
  // After the launch's range was stopped: it is range number ranges() (before the call).
  void Profiled(const LaunchSignature& s);

  // Target index (constructor order) -> its range indices, in profiling order.
  const std::vector<std::vector<size_t>>& RangesOf() const { return ranges_of_; }
  size_t ranges() const { return ranges_; }
  size_t launches() const { return launches_; }

 private:
  std::map<LaunchSignature, size_t> index_;
  std::set<std::string> kernels_;
  std::vector<std::vector<size_t>> ranges_of_;
  std::vector<bool> this_step_;
  size_t launches_;
  size_t complete_ = 0;
  size_t ranges_ = 0;
};

}  // namespace medprof::profiler
