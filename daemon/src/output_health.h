// output_health.h — whether the output directory takes what the daemon writes, and
// what it could not write while it did not.
//
// A full disk (ENOSPC, EDQUOT, EFBIG) or an output made unwritable or deleted (EACCES,
// EROFS, ENOENT, EIO, ...) turns the state to "full" or "unwritable". Then:
//   - the log says so once, then at most every kLogIntervalMs with what was lost since;
//   - writers try again at most every kRetryIntervalMs (may_try); frames arriving in
//     between are counted as not written (skipped), not attempted;
//   - the first write that succeeds again turns the state back to "ok" and says so;
//   - so does probe(), which tries a small file of its own every kRetryIntervalMs while
//     the output is down, so that space that comes back while nothing is being written
//     (a paused producer) is seen at once, not at the next frame.
// summary() goes into the worker's heartbeat and the supervisor's status, so
// `tensorscope status` shows it.
//
// Used by a worker's render thread (videos) and by the supervisor (index.json, the
// session directory). Thread safety: the writers (may_try, failed, succeeded, skipped)
// from one thread; summary() from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace tensorscope::daemon {

class OutputHealth {
 public:
  static constexpr int64_t kRetryIntervalMs = 1000;
  static constexpr int64_t kLogIntervalMs = 30000;

  explicit OutputHealth(std::string where) : where_(std::move(where)) {}

  // True when a write should be attempted now (healthy, or time to try again).
  bool may_try(int64_t now_ms) const;
  // A write failed with `err` (an errno value); `what` says what was being written.
  void failed(int err, const std::string& what, int64_t now_ms);
  // A write succeeded.
  void succeeded(int64_t now_ms);
  // A frame (or record) was not attempted because the output is down.
  void skipped(int64_t now_ms);
  // While down, at most every kRetryIntervalMs: whether `dir` takes a small file again
  // (written, synced, removed); succeeded() when it does. Any thread.
  void probe(const std::string& dir, int64_t now_ms);

  bool ok() const;
  // {"state": "ok"|"full"|"unwritable", "error": ..., "down_since_ms": ...,
  //  "not_written": <frames not written, cumulative>, "failures": <failed writes>}
  nlohmann::json summary() const;

  // "full" for ENOSPC/EDQUOT/EFBIG, "unwritable" for any other error.
  static const char* state_for(int err);

 private:
  void log_if_due(int64_t now_ms);

  const std::string where_;
  mutable std::mutex mutex_;
  std::string state_ = "ok";
  std::string error_;
  int64_t down_since_ms_ = 0;
  int64_t last_failure_ms_ = 0;
  int64_t last_probe_ms_ = 0;
  int64_t last_log_ms_ = 0;
  uint64_t not_written_ = 0;
  uint64_t not_written_at_log_ = 0;
  uint64_t failures_ = 0;
};

}  // namespace tensorscope::daemon
