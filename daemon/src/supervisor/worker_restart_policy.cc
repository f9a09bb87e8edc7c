// worker_restart_policy.cc — see worker_restart_policy.h.
#include "supervisor/worker_restart_policy.h"

#include <algorithm>

namespace tensorscope::daemon {

WorkerRestartPolicy::WorkerRestartPolicy(RestartPolicyConfig config)
    : config_(config), backoff_ms_(config.initial_backoff_ms) {}

void WorkerRestartPolicy::started(int64_t now) {
  started_ms_ = now;
  last_heard_ms_ = now;
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
