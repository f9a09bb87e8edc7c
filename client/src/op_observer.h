// op_observer.h — one process-wide at::RecordFunction callback that tells listeners
// (the module tracks) about top-level forward ATen ops and about autograd nodes.
//
// Used inside the training process: libtorch modules have no hooks, so tracking sees
// every op instead. The callback is installed while at least one listener exists and
// removed with the last one. A forward op is "top level" when it is not nested in
// another observed op (aten::linear's inner aten::t/addmm are not) and does not run
// inside an autograd node (backward ops never look like forward ops). Ops run by the
// listeners themselves (copies, transforms) are not reported.
// Thread safety: add/remove from any thread; listeners are called on the thread that
// runs the op and must be thread safe; a listener may still be called briefly after
// remove_op_listener() returns (it must ignore calls once stopped).
//
// Design: docs/design/module_tracking.md (what RecordFunction gives, and its pitfalls).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/ivalue.h>

namespace tensorscope {

class OpListener {
 public:
  virtual ~OpListener() = default;
  // A top-level forward op starts. Returns a nonzero token to hear about its end.
  virtual uint64_t on_op_start(const char* op_name, c10::ArrayRef<const c10::IValue> inputs) = 0;
  // The op that returned `token` ended; `outputs` are its results.
  virtual void on_op_end(uint64_t token, const std::vector<c10::IValue>& outputs) = 0;
  // An autograd node starts: `grads` are the gradients of its forward op's outputs (by
  // output number); the node was created on forward thread `forward_thread` with
  // sequence number `sequence_nr` (the grad_fn's sequence_nr()).
  virtual void on_backward_node(uint64_t forward_thread, int64_t sequence_nr,
                                c10::ArrayRef<const c10::IValue> grads) = 0;
};

// Forwards to a listener it does not own: what a track registers, so that the listener
// lists threads keep cached (refreshed at their next op) never keep a stopped track, and
// the parameters it references, alive.
class WeakOpListener : public OpListener {
 public:
  explicit WeakOpListener(std::weak_ptr<OpListener> target) : target_(std::move(target)) {}
  uint64_t on_op_start(const char* op_name, c10::ArrayRef<const c10::IValue> inputs) override {
    auto target = target_.lock();
    return target ? target->on_op_start(op_name, inputs) : 0;
  }
  void on_op_end(uint64_t token, const std::vector<c10::IValue>& outputs) override {
    if (auto target = target_.lock()) target->on_op_end(token, outputs);
  }
  void on_backward_node(uint64_t forward_thread, int64_t sequence_nr, c10::ArrayRef<const c10::IValue> grads) override {
    if (auto target = target_.lock()) target->on_backward_node(forward_thread, sequence_nr, grads);
  }

 private:
  std::weak_ptr<OpListener> target_;
};

void add_op_listener(std::shared_ptr<OpListener> listener);
void remove_op_listener(const OpListener* listener);

// at::RecordFunction's id of the calling thread (what autograd nodes record as their
// forward thread).
uint64_t current_op_thread_id();

// While alive, ops run by the calling thread are not reported (the tracks' own copies
// and transforms, run outside a callback).
class ObserverPause {
 public:
  ObserverPause();
  ~ObserverPause();
  ObserverPause(const ObserverPause&) = delete;
  ObserverPause& operator=(const ObserverPause&) = delete;

 private:
  bool previous_;
};

}  // namespace tensorscope
