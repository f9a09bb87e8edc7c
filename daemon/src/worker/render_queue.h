// render_queue.h — a bounded FIFO of render jobs served by one thread.
//
// Used inside a worker process: the reader thread reduces records and pushes jobs; the
// render thread draws and encodes them in order. push() waits while the queue is full
// (backpressure onto the ring, where the client counts drops instead of waiting). A job
// that throws is logged and counted; the thread lives on.
// Thread safety: push/drain/stop from one producer thread; jobs run on the render thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tensorscope::daemon {

class RenderQueue {
 public:
  using Job = std::function<void()>;

  explicit RenderQueue(size_t capacity);
  ~RenderQueue();

  void push(Job job);
  // Like push(), but while the queue stays full calls `waiting` every `tick_ms` (the
  // worker keeps its heartbeat going while a slow frame, e.g. t-SNE, renders).
  void push(Job job, const std::function<void()>& waiting, int tick_ms);
  // Waits until every queued job has run.
  void drain();
  // Waits at most `timeout_ms` for that; true when the queue is idle.
  bool drain_for(int timeout_ms);
  uint64_t errors() const;
  size_t depth() const;

 private:
  void run();

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable not_empty_, not_full_, idle_;
  std::deque<Job> jobs_;
  bool running_job_ = false;
  bool stop_ = false;
  uint64_t errors_ = 0;
  std::thread thread_;
};

}  // namespace tensorscope::daemon
