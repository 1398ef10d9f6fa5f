#include "server/domain/result_rows.h"

#include <string>
#include <vector>

#include "common/kernel_taxonomy.h"

namespace medprof::server {

KernelRow KernelRowOf(const v1::KernelStat& k) {
  KernelRow r;
  r.name = k.name();
  r.op = k.op();
  r.phase = k.phase();
  r.category = k.category().empty()
                   ? std::string(taxonomy::CategoryName(taxonomy::ClassifyKernel(k.name(), k.op())))
                   : k.category();
  r.count = k.count();
  r.total_ns = k.total_ns();
  r.min_ns = k.min_ns();
  r.max_ns = k.max_ns();
  r.grid.assign(k.grid().begin(), k.grid().end());
  r.block.assign(k.block().begin(), k.block().end());
  r.registers = k.registers();
  r.shared_bytes = k.shared_bytes();
  r.theoretical_occupancy = k.theoretical_occupancy();
  return r;
}

SignatureRow SignatureRowOf(const v1::KernelSignature& s, int64_t steps) {
  return SignatureRow{s.id(), s.kernel(), s.op(), s.phase(), s.shapes(),
                      std::vector<int>(s.grid().begin(), s.grid().end()),
                      std::vector<int>(s.block().begin(), s.block().end()), s.dynamic_shared_bytes(),
                      s.count(), s.total_ns(), s.min_ns(), s.max_ns(), steps};
}

}  // namespace medprof::server
