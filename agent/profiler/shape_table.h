// ShapeTable: the input shapes of LibTorch ops, interned, so a kernel launch can carry the shapes
// of the op that launched it in a 32-bit id (the high half of its external correlation id).
//
// The op tracer hashes each op's tensor inputs (dtype and sizes) and asks Intern(hash, describe):
// the text is made by `describe` only the first time a hash is seen. Ids are dense from 1; 0 means
// "no shapes" (the op had no tensor input, or shapes were not recorded). A 64-bit hash identifies a
// shape set; two sets colliding would share an id (probability ~n²/2⁶⁵ for n distinct sets).
//
// External correlation ids: EncodeExternalId packs (op slot, shape id) as
// `shape_id << 32 | (op_slot + 1)`; 0 is never produced, so CUPTI's "no id" stays distinct.
//
// Thread-safe: Intern and Lookup may run on any thread (one mutex; the op tracer keeps a
// per-thread cache in front of it).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/fnv_hash.h"

namespace medprof::profiler {

inline uint64_t EncodeExternalId(uint32_t op_slot, uint32_t shape_id) {
  return (uint64_t{shape_id} << 32) | (uint64_t{op_slot} + 1);
}
// The op slot of an external id; false for 0 (no op).
inline bool DecodeOpSlot(uint64_t external_id, uint32_t* op_slot) {
  const uint32_t low = static_cast<uint32_t>(external_id & 0xffffffffu);
  if (low == 0) return false;
  *op_slot = low - 1;
  return true;
}
inline uint32_t DecodeShapeId(uint64_t external_id) { return static_cast<uint32_t>(external_id >> 32); }

class ShapeTable {
 public:
  // Hard cap on distinct shape sets; past it new sets get id 0 ("no shapes").
  static constexpr size_t kMaxEntries = 1 << 16;

  uint32_t Intern(uint64_t hash, const std::function<std::string()>& describe);
  // The text of `id`; "" for 0 or an unknown id.
  std::string Lookup(uint32_t id) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, uint32_t> ids_;
  std::vector<std::string> texts_;  // by id - 1
};

// What the op tracer feeds its inputs to (dtype, sizes, strides, scalar arguments).
using ShapeHasher = FnvHasher;

}  // namespace medprof::profiler
