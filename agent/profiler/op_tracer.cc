#include "agent/profiler/op_tracer.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// Per-thread cache of shape hash -> id in front of the ShapeTable's mutex (one session).
struct ShapeCache {
  uint64_t session = 0;
  std::unordered_map<uint64_t, uint32_t> ids;
};
thread_local ShapeCache t_shapes;

std::string DtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "f32";
    case c10::ScalarType::Half: return "f16";
    case c10::ScalarType::BFloat16: return "bf16";
    case c10::ScalarType::Double: return "f64";
    case c10::ScalarType::Long: return "i64";
    case c10::ScalarType::Int: return "i32";
    case c10::ScalarType::Bool: return "b8";
    default: return c10::toString(t);
  }
}

// The layout of a tensor: "" when contiguous, "cl" when channels-last (NHWC or NDHWC) dense,
// else its strides ("s[...]"). Two launches with the same sizes and other layouts (the copy into
// channels-last and the copy back) are other problems.
std::string LayoutOf(const at::Tensor& t) {
  const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
  const size_t n = sizes.size();
  auto dense = [&](const std::vector<size_t>& order) {  // dims from innermost out
    int64_t expect = 1;
    for (size_t d : order) {
      if (sizes[d] != 1 && strides[d] != expect) return false;
      expect *= sizes[d];
    }
    return true;
  };
  std::vector<size_t> row_major;
  for (size_t i = n; i-- > 0;) row_major.push_back(i);
  if (dense(row_major)) return "";
  if (n == 4 || n == 5) {
    std::vector<size_t> cl = {1};  // channels innermost, then the spatial dims from the last, then N
    for (size_t i = n - 1; i >= 2; --i) cl.push_back(i);
    cl.push_back(0);
    if (dense(cl)) return "cl";
  }
  return absl::StrCat("s[", absl::StrJoin(strides, ","), "]");
}

void HashTensor(const at::Tensor& t, ShapeHasher* h) {
  if (!t.defined()) {
    h->Add(~uint64_t{0});
    return;
  }
  h->Add(static_cast<uint64_t>(t.scalar_type()) << 8 | static_cast<uint64_t>(t.dim()));
  for (int64_t d : t.sizes()) h->Add(static_cast<uint64_t>(d));
  for (int64_t d : t.strides()) h->Add(static_cast<uint64_t>(d) ^ 0x5354u << 48);
}

// Non-tensor arguments that select another problem (a convolution's stride, padding, groups):
// ints, int lists, doubles and bools; true when `v` is one.
bool HashScalar(const c10::IValue& v, ShapeHasher* h) {
  if (v.isInt()) {
    h->Add(0x494e54u);
    h->Add(static_cast<uint64_t>(v.toInt()));
  } else if (v.isBool()) {
    h->Add(0x424f4f4cu + (v.toBool() ? 1 : 0));
  } else if (v.isDouble()) {
    const double d = v.toDouble();
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof(bits));
    h->Add(0x44424cu);
    h->Add(bits);
  } else if (v.isIntList()) {
    h->Add(0x494c53u);
    for (int64_t x : v.toIntVector()) h->Add(static_cast<uint64_t>(x));
  } else {
    return false;
  }
  return true;
}

std::string DescribeScalar(const c10::IValue& v) {
  if (v.isInt()) return absl::StrCat(v.toInt());
  if (v.isBool()) return v.toBool() ? "true" : "false";
  if (v.isDouble()) return absl::StrCat(v.toDouble());
  if (v.isIntList()) return absl::StrCat("[", absl::StrJoin(v.toIntVector(), ","), "]");
  return "";
}

std::string DescribeTensor(const at::Tensor& t) {
  if (!t.defined()) return "-";
  std::string out = DtypeName(t.scalar_type());
  out.push_back('[');
  bool first = true;
  for (int64_t d : t.sizes()) {
    absl::StrAppend(&out, first ? "" : ",", d);
    first = false;
  }
  out.push_back(']');
  return out + LayoutOf(t);
}

// Tensor inputs (sizes and layout), tensor lists (a list of more than 4 is summarized by its length
// and first) and the scalar arguments of HashScalar, in argument order.
std::string DescribeInputs(c10::ArrayRef<const c10::IValue> inputs) {
  std::string out;
  auto add = [&out](const std::string& part) { absl::StrAppend(&out, out.empty() ? "" : " ", part); };
  for (const c10::IValue& v : inputs) {
    if (v.isTensor()) {
      add(DescribeTensor(v.toTensor()));
    } else if (v.isTensorList()) {
      const c10::List<at::Tensor> list = v.toTensorList();
      if (list.size() > 4) {
        add(absl::StrCat("(", list.size(), "x ", DescribeTensor(list.get(0)), "...)"));
        continue;
      }
      std::string inner;
      for (size_t i = 0; i < list.size(); ++i) absl::StrAppend(&inner, i ? " " : "", DescribeTensor(list.get(i)));
      add(absl::StrCat("(", inner, ")"));
    } else if (std::string scalar = DescribeScalar(v); !scalar.empty()) {
      add(scalar);
    }
  }
  return out;
}

// The id of the op's input shapes (0: no tensor input, or shapes LibTorch cannot give).
uint32_t ShapeIdOf(const at::RecordFunction& fn, ShapeTable* table, uint64_t session) {
  ShapeHasher h;
  bool any = false;
  try {
    for (const c10::IValue& v : fn.inputs()) {
      if (v.isTensor()) {
        HashTensor(v.toTensor(), &h);
        any = true;
      } else if (v.isTensorList()) {
        const c10::List<at::Tensor> list = v.toTensorList();
        h.Add(0x4c495354u ^ list.size());
        for (size_t i = 0; i < list.size(); ++i) HashTensor(list.get(i), &h);
        any = true;
      } else {
        (void)HashScalar(v, &h);
      }
    }
  } catch (const std::exception&) {
    return 0;  // e.g. a tensor without sizes (nested): the op is still attributed, without shapes
  }
  if (!any) return 0;
  if (t_shapes.session != session || t_shapes.ids.size() > 4096) {
    t_shapes.session = session;
    t_shapes.ids.clear();
  }
  auto [it, fresh] = t_shapes.ids.try_emplace(h.hash(), 0);
  if (fresh) it->second = table->Intern(h.hash(), [&fn] { return DescribeInputs(fn.inputs()); });
  return it->second;
}

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
  const uint32_t shape_id = tracer->shapes() != nullptr ? ShapeIdOf(fn, tracer->shapes(), session) : 0;
  ctx->slot = tracer->BeginOp(fn.name(), shape_id, session, &ctx->counted);
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
                                                           OpListener* listener, ShapeTable* shapes) {
  if (tracker == nullptr || ops == nullptr) {
    return absl::InvalidArgumentError("OpTracer: tracker and aggregator are required");
  }
  return std::unique_ptr<OpTracer>(new OpTracer(tracker, ops, listener, shapes));
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
    cb.needsInputs(shapes_ != nullptr);
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

OpAggregator::Slot* OpTracer::BeginOp(const char* name, uint32_t shape_id, uint64_t session, bool* counted) {
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
  if (listener_ != nullptr) listener_->OnOpBegin(cached->id, shape_id);
  return cached;
}

void OpTracer::EndOp(OpAggregator::Slot* slot, bool counted, int64_t inclusive_ns, int64_t self_ns) {
  if (listener_ != nullptr) listener_->OnOpEnd(slot->id);
  if (counted) OpAggregator::Add(slot, inclusive_ns, self_ns);
}

}  // namespace medprof::profiler
