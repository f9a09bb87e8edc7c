#include "worker/render_queue.h"

#include <chrono>

#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {

RenderQueue::RenderQueue(size_t lanes, size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {
  if (lanes < 1) lanes = 1;
  for (size_t i = 0; i < lanes; ++i) lanes_.push_back(std::make_unique<Lane>());
  for (auto& lane : lanes_) lane->thread = std::thread([this, l = lane.get()] { run(*l); });
}

RenderQueue::~RenderQueue() {
  for (auto& lane : lanes_) {
    {
      std::lock_guard<std::mutex> lock(lane->mutex);
      lane->stop = true;
    }
    lane->not_empty.notify_all();
  }
  for (auto& lane : lanes_) lane->thread.join();
}

void RenderQueue::push(RenderJob job) {
  push(
      std::move(job), [] {}, 1000);
}

void RenderQueue::push(RenderJob job, const std::function<void()>& waiting, int tick_ms) {
  Lane& lane = *lanes_[job.lane % lanes_.size()];
  std::unique_lock<std::mutex> lock(lane.mutex);
  auto room = [&] { return lane.jobs.size() < capacity_ || shedding_.load(std::memory_order_relaxed); };
  while (!lane.not_full.wait_for(lock, std::chrono::milliseconds(tick_ms), room)) {
    lock.unlock();
    waiting();
    lock.lock();
  }
  if (job.frame && shedding_.load(std::memory_order_relaxed)) {
    shed_frames_.fetch_add(1, std::memory_order_relaxed);
    return;  // dropped (destroyed after the lock is released: locals go before parameters)
  }
  lane.jobs.push_back(std::move(job));
  lane.not_empty.notify_one();
}

size_t RenderQueue::shed() {
  shedding_.store(true, std::memory_order_relaxed);
  size_t dropped = 0;
  for (auto& lane : lanes_) {
    std::deque<RenderJob> gone;  // destroyed after the lock is released
    {
      std::lock_guard<std::mutex> lock(lane->mutex);
      std::deque<RenderJob> kept;
      for (RenderJob& j : lane->jobs) (j.frame ? gone : kept).push_back(std::move(j));
      lane->jobs = std::move(kept);
      if (lane->jobs.empty() && !lane->running_job) lane->idle.notify_all();
    }
    lane->not_full.notify_all();
    dropped += gone.size();
  }
  shed_frames_.fetch_add(dropped, std::memory_order_relaxed);
  return dropped;
}

void RenderQueue::push_after_all(Job job, const std::function<void()>& waiting, int tick_ms) {
  auto left = std::make_shared<std::atomic<size_t>>(lanes_.size());
  auto shared = std::make_shared<Job>(std::move(job));
  for (size_t i = 0; i < lanes_.size(); ++i) {
    push(RenderJob{i,
                   [left, shared] {
                     if (left->fetch_sub(1, std::memory_order_acq_rel) == 1) (*shared)();
                   }},
         waiting, tick_ms);
  }
}

bool RenderQueue::wait_idle(Lane& lane, int timeout_ms) {
  std::unique_lock<std::mutex> lock(lane.mutex);
  auto idle = [&] { return lane.jobs.empty() && !lane.running_job; };
  if (timeout_ms < 0) {
    lane.idle.wait(lock, idle);
    return true;
  }
  return lane.idle.wait_for(lock, std::chrono::milliseconds(timeout_ms), idle);
}

void RenderQueue::drain() {
  for (auto& lane : lanes_) (void)wait_idle(*lane, -1);
}

bool RenderQueue::drain_for(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (auto& lane : lanes_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!wait_idle(*lane, std::max<int>(0, static_cast<int>(left.count())))) return false;
  }
  return true;
}

size_t RenderQueue::depth() const {
  size_t total = 0;
  for (const auto& lane : lanes_) {
    std::lock_guard<std::mutex> lock(lane->mutex);
    total += lane->jobs.size();
  }
  return total;
}

std::vector<uint64_t> RenderQueue::jobs_run() const {
  std::vector<uint64_t> out;
  for (const auto& lane : lanes_) {
    std::lock_guard<std::mutex> lock(lane->mutex);
    out.push_back(lane->run);
  }
  return out;
}

void RenderQueue::run(Lane& lane) {
  std::unique_lock<std::mutex> lock(lane.mutex);
  for (;;) {
    lane.not_empty.wait(lock, [&] { return lane.stop || !lane.jobs.empty(); });
    if (lane.jobs.empty()) return;  // stop requested and nothing left
    Job job = std::move(lane.jobs.front().run);
    lane.jobs.pop_front();
    lane.running_job = true;
    lane.not_full.notify_one();
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
    job = nullptr;  // what the job held (a video, a mapping) goes on this thread, now
    if (failed) {
      // The first ten failures, then one in a thousand: a failing stream cannot flood the log.
      const uint64_t before = errors_.fetch_add(1, std::memory_order_relaxed);
      if (before < 10 || before % 1000 == 0) {
        TS_LOG_ERROR("render job failed: {} ({} failures so far)", why, before + 1);
      }
    }
    lock.lock();
    lane.running_job = false;
    ++lane.run;
    if (lane.jobs.empty()) lane.idle.notify_all();
  }
}

}  // namespace tensorscope::daemon
