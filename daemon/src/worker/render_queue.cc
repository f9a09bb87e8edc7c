#include "worker/render_queue.h"

#include <chrono>

#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {

RenderQueue::RenderQueue(size_t capacity) : capacity_(capacity), thread_([this] { run(); }) {}

RenderQueue::~RenderQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  not_empty_.notify_all();
  thread_.join();
}

void RenderQueue::push(Job job) {
  std::unique_lock<std::mutex> lock(mutex_);
  not_full_.wait(lock, [&] { return jobs_.size() < capacity_; });
  jobs_.push_back(std::move(job));
  not_empty_.notify_one();
}

void RenderQueue::push(Job job, const std::function<void()>& waiting, int tick_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!not_full_.wait_for(lock, std::chrono::milliseconds(tick_ms),
                             [&] { return jobs_.size() < capacity_; })) {
    lock.unlock();
    waiting();
    lock.lock();
  }
  jobs_.push_back(std::move(job));
  not_empty_.notify_one();
}

void RenderQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return jobs_.empty() && !running_job_; });
}

bool RenderQueue::drain_for(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return jobs_.empty() && !running_job_; });
}

uint64_t RenderQueue::errors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return errors_;
}

size_t RenderQueue::depth() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return jobs_.size();
}

void RenderQueue::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    not_empty_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stop requested and nothing left
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    running_job_ = true;
    not_full_.notify_one();
    lock.unlock();
    bool failed = false;
    std::string why;
    try {
      job();
    } catch (const std::exception& e) {
      failed = true;
      why = e.what();
    } catch (...) {
      failed = true;
      why = "an unknown exception";
    }
    // The first ten failures, then one in a thousand: a failing stream cannot flood the log.
    if (failed && (errors_ < 10 || errors_ % 1000 == 0)) {
      TS_LOG_ERROR("render job failed: {} ({} failures so far)", why, errors_ + 1);
    }
    lock.lock();
    running_job_ = false;
    if (failed) ++errors_;
    if (jobs_.empty()) idle_.notify_all();
  }
}

}  // namespace tensorscope::daemon
