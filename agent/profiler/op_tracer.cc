#include "agent/profiler/op_tracer.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"

namespace medprof::profiler {
namespace {

// The tracer whose callback is installed; the callbacks are plain function pointers.
std::atomic<OpTracer*> g_active{nullptr};
// Bumped at every Start(): a thread's stack left over from an earlier session is discarded.
std::atomic<uint64_t> g_session{0};

// One open op on this thread.
struct OpenOp {
  int64_t start_ns;
  int64_t child_ns;  // inclusive time of ops nested directly inside
};

struct ThreadStack {
  uint64_t session = 0;
  std::vector<OpenOp> ops;
};
thread_local ThreadStack t_stack;

// Per-thread cache (name pointer, interned phase) -> slot, so the hot path takes no lock.
// Valid for one session (one tracker and aggregator); a hit is confirmed by comparing the
// name text, so a name pointer reused for another string cannot alias.
struct SlotCache {
  struct KeyHash {
    size_t operator()(const std::pair<const char*, const std::string*>& k) const {
      return std::hash<const void*>()(k.first) * 31 + std::hash<const void*>()(k.second);
    }
  };
  uint64_t session = 0;
  std::unordered_map<std::pair<const char*, const std::string*>, OpAggregator::Slot*, KeyHash> slots;
};
thread_local SlotCache t_cache;

// What the start callback hands to the end callback.
struct OpContext : at::ObserverContext {
  OpTracer* tracer = nullptr;
  uint64_t session = 0;
  int64_t start_ns = 0;
  size_t depth = 0;  // index of this op's entry in the thread's stack
  OpAggregator::Slot* slot = nullptr;
  bool counted = false;
};

std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) {
  OpTracer* tracer = g_active.load(std::memory_order_acquire);
  if (tracer == nullptr) return nullptr;
  const uint64_t session = g_session.load(std::memory_order_acquire);
  if (t_stack.session != session) {
    t_stack.session = session;
    t_stack.ops.clear();
  }
  auto ctx = std::make_unique<OpContext>();
  ctx->tracer = tracer;
  ctx->session = session;
  ctx->start_ns = MonotonicNs();
  ctx->slot = tracer->BeginOp(fn.name(), session, &ctx->counted);
  ctx->depth = t_stack.ops.size();
  t_stack.ops.push_back(OpenOp{ctx->start_ns, 0});
  return ctx;
}

void OnOpEnd(const at::RecordFunction& /*fn*/, at::ObserverContext* base) {
  auto* ctx = static_cast<OpContext*>(base);
  if (ctx == nullptr || ctx->tracer != g_active.load(std::memory_order_acquire)) return;
  const int64_t now = MonotonicNs();
  const int64_t inclusive = now - ctx->start_ns;
  int64_t self = inclusive;
  // The op normally ends on the thread it began on, with its entry on top of the stack. An
  // op that ends elsewhere (async ops) cannot see its children: its self time is inclusive.
  if (t_stack.session == ctx->session && ctx->depth < t_stack.ops.size() &&
      t_stack.ops[ctx->depth].start_ns == ctx->start_ns) {
    self = inclusive - t_stack.ops[ctx->depth].child_ns;
    t_stack.ops.resize(ctx->depth);  // also drops children that never ended
    if (!t_stack.ops.empty()) t_stack.ops.back().child_ns += inclusive;
  }
  ctx->tracer->EndOp(ctx->slot, ctx->counted, inclusive, self < 0 ? 0 : self);
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpTracer>> OpTracer::Create(PhaseTracker* tracker, OpAggregator* ops,
                                                           OpListener* listener) {
  if (tracker == nullptr || ops == nullptr) {
    return absl::InvalidArgumentError("OpTracer: tracker and aggregator are required");
  }
  return std::unique_ptr<OpTracer>(new OpTracer(tracker, ops, listener));
}

OpTracer::~OpTracer() { Stop(); }

absl::Status OpTracer::Start() {
  if (handle_ != 0) return absl::OkStatus();
  OpTracer* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, this, std::memory_order_acq_rel)) {
    return absl::FailedPreconditionError(
        "op tracer: another OpTracer is already installed in this process (one at a time)");
  }
  g_session.fetch_add(1, std::memory_order_acq_rel);
  try {
    at::RecordFunctionCallback cb(&OnOpStart, &OnOpEnd);
    cb.needsInputs(false);
    cb.needsIds(false);
    cb.scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
               at::RecordScope::USER_SCOPE});
    handle_ = at::addGlobalCallback(cb);
  } catch (const std::exception& e) {
    g_active.store(nullptr, std::memory_order_release);
    return absl::InternalError(absl::StrCat("op tracer: at::addGlobalCallback failed: ", e.what()));
  }
  return absl::OkStatus();
}

void OpTracer::Stop() {
  if (handle_ == 0) return;
  at::removeCallback(handle_);
  handle_ = 0;
  OpTracer* self = this;
  g_active.compare_exchange_strong(self, nullptr, std::memory_order_acq_rel);
}

OpAggregator::Slot* OpTracer::BeginOp(const char* name, uint64_t session, bool* counted) {
  if (name == nullptr) name = "";
  *counted = tracker_->measuring();
  const std::string* phase = &tracker_->phase();
  if (t_cache.session != session || t_cache.slots.size() > 4096) {  // bounded: names in temporaries
    t_cache.session = session;
    t_cache.slots.clear();
  }
  OpAggregator::Slot*& cached = t_cache.slots[{name, phase}];
  if (cached == nullptr || std::strcmp(cached->key.name.c_str(), name) != 0) {
    cached = ops_->InternSlot(name, *phase);
  }
  if (listener_ != nullptr) listener_->OnOpBegin(cached->id);
  return cached;
}

void OpTracer::EndOp(OpAggregator::Slot* slot, bool counted, int64_t inclusive_ns, int64_t self_ns) {
  if (listener_ != nullptr) listener_->OnOpEnd(slot->id);
  if (counted) OpAggregator::Add(slot, inclusive_ns, self_ns);
}

}  // namespace medprof::profiler
