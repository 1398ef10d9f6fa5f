#include "agent/profiler/launch_signature.h"

#include "absl/strings/str_format.h"
#include "agent/profiler/shape_table.h"

namespace medprof::profiler {

std::string LaunchSignature::Id() const {
  ShapeHasher h;
  for (const std::string* s : {&kernel, &op, &phase, &shapes}) {
    for (unsigned char c : *s) h.Add(c);
    h.Add(0x100);  // field separator: "ab"+"c" differs from "a"+"bc"
  }
  for (int32_t v : grid) h.Add(static_cast<uint32_t>(v));
  for (int32_t v : block) h.Add(static_cast<uint32_t>(v));
  h.Add(static_cast<uint32_t>(dynamic_shared_bytes));
  return absl::StrFormat("%012x", h.hash() >> 16);
}

}  // namespace medprof::profiler
