#include "agent/profiler/launch_picker.h"

#include <algorithm>

namespace medprof::profiler {

LaunchPicker::LaunchPicker(const std::vector<std::string>& targets,
                           std::map<std::string, std::array<int32_t, 3>> dominant, size_t launches)
    : targets_(targets.begin(), targets.end()), dominant_(std::move(dominant)), launches_(std::max<size_t>(1, launches)) {}

void LaunchPicker::BeginStep(size_t index) {
  any_grid_ = index + 1 >= Steps();
  this_step_.clear();
}

bool LaunchPicker::Want(const std::string& kernel, const Grid& grid) const {
  if (!targets_.count(kernel) || this_step_.count(kernel)) return false;
  auto have = ranges_of_.find(kernel);
  if (have != ranges_of_.end()) {
    return have->second.size() < launches_ && order_[have->second.front()].second == grid;
  }
  if (any_grid_) return true;
  auto d = dominant_.find(kernel);
  if (d == dominant_.end()) return true;  // no trace shape known: the first launch is as good as any
  return static_cast<int32_t>(grid[0]) == d->second[0] && static_cast<int32_t>(grid[1]) == d->second[1] &&
         static_cast<int32_t>(grid[2]) == d->second[2];
}

void LaunchPicker::Profiled(const std::string& kernel, const Grid& grid) {
  std::vector<size_t>& mine = ranges_of_[kernel];
  mine.push_back(order_.size());
  if (mine.size() == launches_) ++complete_;
  this_step_.insert(kernel);
  order_.emplace_back(kernel, grid);
}

}  // namespace medprof::profiler
