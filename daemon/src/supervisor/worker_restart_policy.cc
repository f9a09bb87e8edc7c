// worker_restart_policy.cc — see worker_restart_policy.h.
#include "supervisor/worker_restart_policy.h"

#include <algorithm>

namespace tensorscope::daemon {

WorkerRestartPolicy::WorkerRestartPolicy(RestartPolicyConfig config)
    : config_(config), backoff_ms_(config.initial_backoff_ms) {}

void WorkerRestartPolicy::started(int64_t now) {
  started_ms_ = now;
  heard(now);
}

Silence WorkerRestartPolicy::silence(int64_t now, bool runnable, uint64_t cpu_ticks) {
  if (!heartbeat_missed(now)) return Silence::kHeard;
  if (silent_ms(now) > config_.starved_limit_ms) return Silence::kHung;
  if (runnable || !watching_ || cpu_ticks != watch_ticks_) {
    watching_ = true;
    watch_ticks_ = cpu_ticks;
    watch_since_ms_ = now;
    return Silence::kStarved;
  }
  return now - watch_since_ms_ > config_.heartbeat_timeout_ms ? Silence::kHung : Silence::kStarved;
}

int64_t WorkerRestartPolicy::exited(int64_t now, bool counted) {
  if (now - started_ms_ > config_.healthy_after_ms) backoff_ms_ = config_.initial_backoff_ms;
  const int64_t delay = backoff_ms_;
  restart_at_ms_ = now + delay;
  if (counted) {
    backoff_ms_ = std::min(backoff_ms_ * 2, config_.max_backoff_ms);
    ++restarts_;
  }
  return delay;
}

}  // namespace tensorscope::daemon
