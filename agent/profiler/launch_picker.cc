#include "agent/profiler/launch_picker.h"

#include <algorithm>

namespace medprof::profiler {

std::vector<KernelTarget> ChooseSignatures(const v1::KernelSignatures& signatures, int top_k, double coverage,
                                           int max_signatures) {
  std::map<std::string, KernelTarget> by_kernel;
  for (const v1::KernelSignature& s : signatures.signatures()) {
    KernelTarget& k = by_kernel[s.kernel()];
    k.kernel = s.kernel();
    k.total_ns += s.total_ns();
    k.signatures += 1;
    k.chosen.push_back(&s);
  }
  std::vector<KernelTarget> kernels;
  for (auto& [name, k] : by_kernel) kernels.push_back(std::move(k));
  std::sort(kernels.begin(), kernels.end(), [](const KernelTarget& a, const KernelTarget& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.kernel < b.kernel;
  });
  if (static_cast<int>(kernels.size()) > top_k) kernels.resize(static_cast<size_t>(std::max(0, top_k)));
  for (KernelTarget& k : kernels) {
    std::stable_sort(k.chosen.begin(), k.chosen.end(), [](const v1::KernelSignature* a, const v1::KernelSignature* b) {
      return a->total_ns() > b->total_ns();
    });
    int64_t covered = 0;
    size_t keep = 0;
    while (keep < k.chosen.size() && static_cast<int>(keep) < std::max(1, max_signatures) &&
           (keep == 0 || static_cast<double>(covered) < coverage * static_cast<double>(k.total_ns))) {
      covered += k.chosen[keep]->total_ns();
      ++keep;
    }
    k.chosen.resize(keep);
  }
  return kernels;
}

LaunchSignature ToLaunchSignature(const v1::KernelSignature& s) {
  LaunchSignature out;
  out.kernel = s.kernel();
  out.op = s.op();
  out.phase = s.phase();
  out.shapes = s.shapes();
  for (int i = 0; i < 3; ++i) {
    out.grid[i] = i < s.grid_size() ? s.grid(i) : 0;
    out.block[i] = i < s.block_size() ? s.block(i) : 0;
  }
  out.dynamic_shared_bytes = s.dynamic_shared_bytes();
  return out;
}

LaunchPicker::LaunchPicker(const std::vector<LaunchSignature>& targets, size_t launches)
    : launches_(std::max<size_t>(1, launches)) {
  for (const LaunchSignature& t : targets) {
    if (index_.emplace(t, ranges_of_.size()).second) {
      ranges_of_.emplace_back();
      kernels_.insert(t.kernel);
    }
  }
  this_step_.assign(ranges_of_.size(), false);
}

void LaunchPicker::BeginStep() { std::fill(this_step_.begin(), this_step_.end(), false); }

bool LaunchPicker::Want(const LaunchSignature& s) const {
  auto it = index_.find(s);
  if (it == index_.end()) return false;
  return !this_step_[it->second] && ranges_of_[it->second].size() < launches_;
}

void LaunchPicker::Profiled(const LaunchSignature& s) {
  auto it = index_.find(s);
  if (it == index_.end()) return;
  std::vector<size_t>& mine = ranges_of_[it->second];
  mine.push_back(ranges_++);
  this_step_[it->second] = true;
  if (mine.size() == launches_) ++complete_;
}

}  // namespace medprof::profiler
