// The store's rows of a worker's result records: one conversion each, shared by the ingest of
// streamed runs (result_ingest.cc) and of imported ones (run_import.cc). Pure functions;
// thread-safe.
#pragma once

#include <cstdint>

#include "medprof/v1/results.pb.h"
#include "server/store/records.h"

namespace medprof::server {

// A kernel's row; an empty category is filled from the kernel taxonomy (name and op).
KernelRow KernelRowOf(const v1::KernelStat& k);

// A launch signature's row; its counts cover `steps` measured steps.
SignatureRow SignatureRowOf(const v1::KernelSignature& s, int64_t steps);

}  // namespace medprof::server
