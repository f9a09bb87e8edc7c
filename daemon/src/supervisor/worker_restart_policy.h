// worker_restart_policy.h — when the supervisor restarts a worker, and when it takes one
// for hung: exponential backoff between restarts (reset after a healthy run), the
// heartbeat deadline, a starved worker told apart from a hung one, and the supervisor's
// own stall told apart from a worker's.
//
// A missed heartbeat alone cannot tell a hung worker from a starved one: training
// machines are busy by nature (data-loader processes on every core), and a worker that
// waits for a core, or for the disk while it starts, is silent too. So a silent worker is
// taken for hung only when it is asleep and has used no CPU time for a whole heartbeat
// timeout (a deadlock), or when it has been silent past starved_limit_ms even though it
// runs (a worker spinning without its heartbeat).
//
// Used by the supervisor (one WorkerRestartPolicy per worker slot, one StallDetector for
// its loop). Pure bookkeeping over times the caller passes in (milliseconds of a
// monotonic clock): no clock, no processes, so the policy is unit-tested alone.
// Thread safety: none; the supervisor's single thread.
#pragma once

#include <cstdint>

namespace tensorscope::daemon {

struct RestartPolicyConfig {
  int64_t initial_backoff_ms = 100;     // first delay before a restart
  int64_t max_backoff_ms = 5000;        // the delay doubles after each exit, up to this
  int64_t heartbeat_timeout_ms = 5000;  // silent this long: hung (unless stopped)
  int64_t healthy_after_ms = 10000;     // a worker that ran this long starts over at initial
  int64_t starved_limit_ms = 60000;     // silent this long: hung even while it runs
};

// What a worker's silence is.
enum class Silence {
  kHeard,    // within its heartbeat deadline
  kStarved,  // past it, but runnable or using CPU time: the machine is busy; wait
  kHung,     // past it, asleep without using CPU for a whole timeout (or silent too long)
};

class WorkerRestartPolicy {
 public:
  explicit WorkerRestartPolicy(RestartPolicyConfig config = {});

  // The worker process was started at `now`: its heartbeat deadline starts.
  void started(int64_t now);
  // It was heard from (a heartbeat or any message).
  void heard(int64_t now) {
    last_heard_ms_ = now;
    watching_ = false;
  }
  // It exited (or was killed) at `now`: schedules its restart and returns the delay.
  // A restart requested while stopping is not counted (counted: false).
  int64_t exited(int64_t now, bool counted = true);
  // Starting it failed (fork, socketpair): tried again after the current delay.
  void start_failed(int64_t now) { restart_at_ms_ = now + backoff_ms_; }
  // Whether a worker that is not running should be started now.
  bool restart_due(int64_t now) const { return now >= restart_at_ms_; }
  // Whether a running worker has been silent past the heartbeat timeout.
  bool heartbeat_missed(int64_t now) const { return now - last_heard_ms_ > config_.heartbeat_timeout_ms; }
  int64_t silent_ms(int64_t now) const { return now - last_heard_ms_; }
  // Past the deadline, what the process's scheduler state (`runnable`) and its CPU time
  // so far (`cpu_ticks`, any unit that only grows) say of the silence; call it on each
  // check while the heartbeat is missed.
  Silence silence(int64_t now, bool runnable, uint64_t cpu_ticks);
  // Restarts so far (shown by `tensorscope status`).
  uint64_t restarts() const { return restarts_; }

 private:
  RestartPolicyConfig config_;
  int64_t backoff_ms_;
  int64_t started_ms_ = 0;
  int64_t last_heard_ms_ = 0;
  int64_t restart_at_ms_ = 0;
  uint64_t restarts_ = 0;
  // While silent: the CPU time last seen to change, and since when it has not.
  bool watching_ = false;
  uint64_t watch_ticks_ = 0;
  int64_t watch_since_ms_ = 0;
};

// A gap in the supervisor's own loop (it wakes at least every 100 ms): the process did
// not run (SIGSTOP, a frozen cgroup, a suspended laptop, a starved machine), so the
// workers were not heard because nobody listened.
class StallDetector {
 public:
  explicit StallDetector(int64_t stall_ms = 1000) : stall_ms_(stall_ms) {}
  // Called once per loop; returns the length of the gap since the previous call when it
  // exceeds the stall threshold, else 0.
  int64_t gap(int64_t now) {
    const int64_t gap = last_ms_ != 0 ? now - last_ms_ : 0;
    last_ms_ = now;
    return gap > stall_ms_ ? gap : 0;
  }

 private:
  int64_t stall_ms_;
  int64_t last_ms_ = 0;
};

}  // namespace tensorscope::daemon
