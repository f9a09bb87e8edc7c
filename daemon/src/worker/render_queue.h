// render_queue.h — a worker's render threads: one bounded FIFO of render jobs per lane,
// each served by a thread of its own.
//
// Used inside a worker process: the reader thread reduces records and pushes jobs; the
// render threads draw and encode them. Every stream has one lane (StreamRouter picks it
// when the stream first appears), so a stream's frames are drawn in order, by one thread,
// into its one file, while the streams of one producer are drawn on every lane at once.
// push() waits while the job's lane is full (backpressure onto the ring, where the client
// paces or counts drops instead of waiting). A job that throws is logged and counted; its
// thread lives on. A shutdown that cannot draw its backlog in time sheds it (shed()):
// frames queued or pushed later are dropped, counted, while every other job (finishing a
// video: what was drawn is finalized) still runs.
// Thread safety: push/push_after_all/drain from one producer thread; jobs run on the
// lanes' threads; errors() and depth() from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tensorscope::daemon {

// A render job and the lane (render thread) that runs it.
struct RenderJob {
  size_t lane = 0;
  std::function<void()> run;
  bool frame = false;  // draws one frame: may be shed (RenderQueue::shed)

  explicit operator bool() const { return static_cast<bool>(run); }
  void operator()() const { run(); }
};

class RenderQueue {
 public:
  using Job = std::function<void()>;

  // `lanes` threads (at least 1), each with room for `capacity` waiting jobs.
  RenderQueue(size_t lanes, size_t capacity);
  ~RenderQueue();  // runs what is queued, then joins the threads

  size_t lanes() const { return lanes_.size(); }

  // Queues `job` on lane `job.lane % lanes()`; waits while that lane is full.
  void push(RenderJob job);
  // Like push(), but while the lane stays full calls `waiting` every `tick_ms` (the
  // worker keeps its heartbeat going while a slow frame, e.g. t-SNE, renders).
  void push(RenderJob job, const std::function<void()>& waiting, int tick_ms);
  // Runs `job` once every job pushed before it, on every lane, has run (on the lane that
  // gets there last): e.g. "the producer's videos are all finished".
  void push_after_all(Job job, const std::function<void()>& waiting, int tick_ms);
  // Waits until every queued job has run.
  void drain();
  // Waits at most `timeout_ms` for that; true when every lane is idle.
  bool drain_for(int timeout_ms);
  // From now on frames are not drawn: the frame jobs queued are dropped, and so are those
  // pushed later (a push no longer waits for room); the other jobs run. Returns how many
  // frames it dropped now; shed_frames() counts them all.
  size_t shed();
  uint64_t shed_frames() const { return shed_frames_.load(std::memory_order_relaxed); }
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  size_t depth() const;                    // jobs waiting, all lanes
  std::vector<uint64_t> jobs_run() const;  // per lane, so far

 private:
  struct Lane {
    std::mutex mutex;
    std::condition_variable not_empty, not_full, idle;
    std::deque<RenderJob> jobs;
    bool running_job = false;
    bool stop = false;
    uint64_t run = 0;  // jobs run
    std::thread thread;
  };

  void run(Lane& lane);
  bool wait_idle(Lane& lane, int timeout_ms);  // timeout_ms < 0: no limit

  const size_t capacity_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<uint64_t> errors_{0};
  std::atomic<bool> shedding_{false};
  std::atomic<uint64_t> shed_frames_{0};
};

}  // namespace tensorscope::daemon
