// Compiled with NDEBUG (see client/CMakeLists.txt): RecordFunction::inputs() asserts in
// debug builds that it runs in a start callback, through a flag only release builds of
// libtorch never set.
#include "op_observer.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "cost_meter.h"
#include "tensorscope/base/logging.h"

namespace tensorscope {
namespace {

using ListenerList = std::vector<std::shared_ptr<OpListener>>;

// The listener list is immutable once published. Each thread keeps its own reference
// and refreshes it when `version` moves, so an op costs one relaxed load here (and no
// std::atomic<std::shared_ptr>, which older standard libraries lack).
struct Registry {
  std::mutex mutex;  // add/remove, and a thread refreshing its reference
  std::shared_ptr<const ListenerList> listeners = std::make_shared<const ListenerList>();
  std::atomic<uint64_t> version{1};
  bool installed = false;
  at::CallbackHandle handle = 0;
  std::atomic<bool> error_logged{false};
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: callbacks may run during exit
  return *r;
}

// False once this thread's ThreadState is destroyed (thread exit): callbacks and pauses
// that run later (static destructors) must not touch it. Trivially destructible.
thread_local bool tls_alive = true;

struct ThreadState {
  ~ThreadState() { tls_alive = false; }
  int depth = 0;           // nesting of observed forward ops
  int backward_depth = 0;  // nesting of autograd nodes
  bool busy = false;       // inside a listener, or paused
  uint64_t version = 0;    // of `listeners`
  std::shared_ptr<const ListenerList> listeners;
};
thread_local ThreadState tls;

// This thread's view of the listeners (refreshed after an add or remove).
const ListenerList& current_listeners() {
  Registry& r = registry();
  if (r.version.load(std::memory_order_acquire) != tls.version) {
    std::lock_guard<std::mutex> lock(r.mutex);
    tls.listeners = r.listeners;
    tls.version = r.version.load(std::memory_order_relaxed);
  }
  return *tls.listeners;
}

// Listeners interested in one op's end.
struct OpContext : at::ObserverContext {
  std::vector<std::pair<std::shared_ptr<OpListener>, uint64_t>> interested;
};

void log_listener_error(const char* what) {
  if (!registry().error_logged.exchange(true)) {
    TS_LOG_ERROR("tensorscope tracking: a listener failed ({}); tracking goes on", what);
  }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!tls_alive || tls.busy) return nullptr;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    ++tls.backward_depth;
    const ListenerList& listeners = current_listeners();
    if (listeners.empty()) return nullptr;
    const CostSpan span;
    tls.busy = true;
    try {
      for (const auto& l : listeners) l->on_backward_node(fn.forwardThreadId(), fn.seqNr(), fn.inputs());
    } catch (const std::exception& e) {
      log_listener_error(e.what());
    } catch (...) {
      log_listener_error("unknown exception");
    }
    tls.busy = false;
    return nullptr;
  }
  const int depth = tls.depth++;
  if (depth != 0 || tls.backward_depth != 0) return nullptr;
  const ListenerList& listeners = current_listeners();
  if (listeners.empty()) return nullptr;
  std::unique_ptr<OpContext> context;
  const CostSpan span;
  tls.busy = true;
  try {
    const c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
    const char* name = fn.name();
    for (const auto& l : listeners) {
      const uint64_t token = l->on_op_start(name, inputs);
      if (token == 0) continue;
      if (!context) context = std::make_unique<OpContext>();
      context->interested.emplace_back(l, token);
    }
  } catch (const std::exception& e) {
    log_listener_error(e.what());
  } catch (...) {
    log_listener_error("unknown exception");
  }
  tls.busy = false;
  return context;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (!tls_alive || tls.busy) return;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    if (tls.backward_depth > 0) --tls.backward_depth;
    return;
  }
  if (tls.depth > 0) --tls.depth;
  if (ctx == nullptr) return;
  auto* context = static_cast<OpContext*>(ctx);
  const CostSpan span;
  tls.busy = true;
  try {
    const std::vector<c10::IValue>& outputs = fn.outputs();
    for (const auto& [listener, token] : context->interested) listener->on_op_end(token, outputs);
  } catch (const std::exception& e) {
    log_listener_error(e.what());
  } catch (...) {
    log_listener_error("unknown exception");
  }
  tls.busy = false;
}

}  // namespace

void add_op_listener(std::shared_ptr<OpListener> listener) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto next = std::make_shared<ListenerList>(*r.listeners);
  next->push_back(std::move(listener));
  r.listeners = std::move(next);
  r.version.fetch_add(1, std::memory_order_release);
  if (!r.installed) {
    r.handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                         .needsInputs(true)
                                         .needsOutputs(true)
                                         .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    r.installed = true;
  }
}

void remove_op_listener(const OpListener* listener) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto next = std::make_shared<ListenerList>(*r.listeners);
  next->erase(std::remove_if(next->begin(), next->end(),
                             [&](const std::shared_ptr<OpListener>& l) { return l.get() == listener; }),
              next->end());
  const bool empty = next->empty();
  r.listeners = std::move(next);
  r.version.fetch_add(1, std::memory_order_release);
  if (empty && r.installed) {
    at::removeCallback(r.handle);
    r.installed = false;
  }
}

uint64_t current_op_thread_id() { return at::RecordFunction::currentThreadId(); }

ObserverPause::ObserverPause() : previous_(tls_alive ? tls.busy : true) {
  if (tls_alive) tls.busy = true;
}
ObserverPause::~ObserverPause() {
  if (tls_alive) tls.busy = previous_;
}

}  // namespace tensorscope
