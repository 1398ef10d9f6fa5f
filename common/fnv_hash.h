// FnvHasher: 64-bit FNV-1a over 64-bit words (each word fed as its 8 bytes, low first). What
// launch-signature ids and op input-shape ids are made of; not for anything an adversary picks.
//
// Value type; not thread-safe (one per thread or per call).
#pragma once

#include <cstdint>

namespace medprof {

class FnvHasher {
 public:
  void Add(uint64_t word) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (word >> (8 * i)) & 0xffu;
      hash_ *= 1099511628211ull;
    }
  }
  uint64_t hash() const { return hash_; }

 private:
  uint64_t hash_ = 14695981039346656037ull;
};

}  // namespace medprof
