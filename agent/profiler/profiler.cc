#include "agent/profiler/profiler.h"

namespace medprof::profiler {

v1::LayerStatus MakeLayer(const std::string& layer, bool ran, const std::string& reason) {
  v1::LayerStatus s;
  s.set_layer(layer);
  s.set_ran(ran);
  if (!ran) s.set_reason(reason);
  return s;
}

}  // namespace medprof::profiler
