#include "agent/profiler/cupti_records.h"

#if __has_include(<cupti_activity_deprecated.h>)
#include <cupti_activity_deprecated.h>  // the older record layouts (CUDA >= 12.2)
#endif

namespace medprof::profiler {

const char* MemcpyName(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[memcpy HtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[memcpy DtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "[memcpy HtoA]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "[memcpy AtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "[memcpy AtoA]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "[memcpy AtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "[memcpy DtoA]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[memcpy DtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "[memcpy HtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "[memcpy PtoP]";
    default: return "[memcpy]";
  }
}

// Memcpy and memset records carry the same timing, placement and size fields.
template <typename Transfer>
void CopyTransferFields(const Transfer& t, TraceRecord* out) {
  out->start_ns = t.start;
  out->end_ns = t.end;
  out->correlation_id = t.correlationId;
  out->device_id = t.deviceId;
  out->stream_id = t.streamId;
  out->bytes = t.bytes;
}

bool ConvertActivity(const CUpti_Activity* record, TraceRecord* out) {
  if (record == nullptr) return false;
  *out = TraceRecord{};
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel4*>(record);
      out->kind = RecordKind::kKernel;
      out->name = k->name != nullptr ? k->name : "";
      out->start_ns = k->start;
      out->end_ns = k->end;
      out->correlation_id = k->correlationId;
      out->device_id = k->deviceId;
      out->stream_id = k->streamId;
      out->grid[0] = k->gridX; out->grid[1] = k->gridY; out->grid[2] = k->gridZ;
      out->block[0] = k->blockX; out->block[1] = k->blockY; out->block[2] = k->blockZ;
      out->registers_per_thread = k->registersPerThread;
      out->static_shared_bytes = k->staticSharedMemory;
      out->dynamic_shared_bytes = k->dynamicSharedMemory;
      out->shared_carveout_bytes = k->sharedMemoryExecuted;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy*>(record);
      out->kind = RecordKind::kMemcpy;
      out->name = MemcpyName(m->copyKind);
      CopyTransferFields(*m, out);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset*>(record);
      out->kind = RecordKind::kMemset;
      out->name = "[memset]";
      CopyTransferFields(*m, out);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (e->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return false;
      out->kind = RecordKind::kExternalCorrelation;
      out->correlation_id = e->correlationId;
      out->external_id = e->externalId;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      out->kind = RecordKind::kApi;
      out->start_ns = a->start;
      out->end_ns = a->end;
      out->correlation_id = a->correlationId;
      out->thread_id = a->threadId;
      out->api_cbid = a->cbid;
      out->api_driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace medprof::profiler
