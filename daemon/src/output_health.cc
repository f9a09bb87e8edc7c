// output_health.cc — see output_health.h.
#include "output_health.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {

const char* OutputHealth::state_for(int err) {
  return err == ENOSPC || err == EDQUOT || err == EFBIG ? "full" : "unwritable";
}

bool OutputHealth::may_try(int64_t now_ms) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_ == "ok" || now_ms - last_failure_ms_ >= kRetryIntervalMs;
}

bool OutputHealth::ok() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_ == "ok";
}

void OutputHealth::failed(int err, const std::string& what, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++failures_;
  ++not_written_;
  last_failure_ms_ = now_ms;
  error_ = what;
  if (state_ == "ok") {
    state_ = state_for(err);
    down_since_ms_ = now_ms;
    last_log_ms_ = now_ms;
    not_written_at_log_ = not_written_;
    TS_LOG_ERROR("output {} ({}): {}; retrying every {} s, counting what is not written",
                 state_ == "full" ? "full" : "unwritable", where_, what, kRetryIntervalMs / 1000);
    return;
  }
  state_ = state_for(err);
  log_if_due(now_ms);
}

void OutputHealth::skipped(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++not_written_;
  log_if_due(now_ms);
}

void OutputHealth::probe(const std::string& dir, int64_t now_ms) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_ == "ok" || now_ms - last_probe_ms_ < kRetryIntervalMs) return;
    last_probe_ms_ = now_ms;
  }
  const std::string path = dir + "/.tensorscope-probe-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  char block[4096];
  std::memset(block, 0, sizeof block);
  const bool written = ::write(fd, block, sizeof block) == static_cast<ssize_t>(sizeof block) && ::fsync(fd) == 0;
  ::close(fd);
  ::unlink(path.c_str());
  if (written) succeeded(now_ms);
}

void OutputHealth::log_if_due(int64_t now_ms) {
  if (now_ms - last_log_ms_ < kLogIntervalMs) return;
  TS_LOG_ERROR("output still {} ({}) after {} s: {} not written in the last {} s; last error: {}", state_, where_,
               (now_ms - down_since_ms_) / 1000, not_written_ - not_written_at_log_, (now_ms - last_log_ms_) / 1000,
               error_);
  last_log_ms_ = now_ms;
  not_written_at_log_ = not_written_;
}

void OutputHealth::succeeded(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_ == "ok") return;
  TS_LOG_WARN("output writable again ({}) after {} s; {} not written in all so far", where_,
              (now_ms - down_since_ms_) / 1000, not_written_);
  state_ = "ok";
  error_.clear();
}

nlohmann::json OutputHealth::summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json out = {{"state", state_}, {"not_written", not_written_}, {"failures", failures_}};
  if (state_ != "ok") {
    out["error"] = error_;
    out["down_since_ms"] = down_since_ms_;
  }
  return out;
}

}  // namespace tensorscope::daemon
