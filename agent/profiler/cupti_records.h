// Conversion of CUPTI activity records into medprof's plain TraceRecords (trace_records.h).
//
// Reads the fields medprof uses through the oldest record layouts that carry them
// (CUpti_ActivityKernel4, CUpti_ActivityMemcpy, CUpti_ActivityMemset, ...): CUPTI only ever
// appends fields to newer versions, so these prefixes are valid for the records of every
// CUPTI from CUDA 11 to 13. Pure: no CUPTI library call, so tests feed hand-built records.
//
// Thread-safe. Only built with CUPTI (MEDPROF_HAVE_CUDA).
#pragma once

#include <cupti_activity.h>

#include "agent/profiler/trace_records.h"

namespace medprof::profiler {

// Fills `out` from `record` and returns true for the kinds the trace layer uses
// (CONCURRENT_KERNEL, KERNEL, MEMCPY, MEMSET, EXTERNAL_CORRELATION of kind CUSTOM0, RUNTIME,
// DRIVER); returns false for every other kind. API names are left empty (api_cbid is set).
bool ConvertActivity(const CUpti_Activity* record, TraceRecord* out);

// "[memcpy HtoD]", "[memcpy DtoD]", ... for CUpti_ActivityMemcpyKind values.
const char* MemcpyName(uint8_t copy_kind);

}  // namespace medprof::profiler
