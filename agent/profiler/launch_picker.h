// LaunchPicker: which kernel launches the metrics layer profiles under kernel replay.
//
// For each target kernel: its first launch with the kernel's dominant grid (the launch shape
// that took most of its trace time), one launch per kernel per step, in `launches` steps — the
// same launch of the same problem each time, so a median over them is over repeats, not over
// shapes (one kernel and grid can serve several problem sizes within a step: GroupNorm's
// statistics kernel runs 32 blocks at every level of the U-Net). The caller runs up to
// Steps() steps, calling BeginStep before each; the last is an "any grid" step in which a
// kernel still without a profiled launch takes its first launch whatever the grid. A kernel's
// later launches must have the grid of its first profiled one.
//
// Pure logic, no CUPTI: the launch callback asks Want() at API enter and reports Profiled()
// after the range was stopped. Not thread-safe (CUPTI callbacks of one thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace medprof::profiler {

class LaunchPicker {
 public:
  using Grid = std::array<unsigned, 3>;

  LaunchPicker(const std::vector<std::string>& targets, std::map<std::string, std::array<int32_t, 3>> dominant,
               size_t launches);

  // Steps to run at most: `launches` + 1 with the dominant grid required, then one any-grid step.
  size_t Steps() const { return launches_ + 2; }
  // Call before step `index` (0-based) runs.
  void BeginStep(size_t index);
  // True once every target has all its launches (no more steps needed).
  bool Complete() const { return complete_ == targets_.size(); }

  // At a launch's API enter: profile this one?
  bool Want(const std::string& kernel, const Grid& grid) const;
  // After the launch's range was stopped: it is range Order().size() (before the call).
  void Profiled(const std::string& kernel, const Grid& grid);

  // Range index -> (kernel, grid), in the order the ranges were profiled.
  const std::vector<std::pair<std::string, Grid>>& Order() const { return order_; }
  // Kernel -> its range indices (kernels with none are absent).
  const std::map<std::string, std::vector<size_t>>& RangesOf() const { return ranges_of_; }
  size_t launches() const { return launches_; }

 private:
  std::set<std::string> targets_;
  std::map<std::string, std::array<int32_t, 3>> dominant_;
  size_t launches_;
  bool any_grid_ = false;
  size_t complete_ = 0;
  std::set<std::string> this_step_;
  std::map<std::string, std::vector<size_t>> ranges_of_;
  std::vector<std::pair<std::string, Grid>> order_;
};

}  // namespace medprof::profiler
