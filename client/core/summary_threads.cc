// summary_threads.cc — see summary_threads.h.
#include "summary_threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <thread>

namespace tensorscope {
namespace {

size_t allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// One process's helpers. Kept alive for good (its detached threads use it; a forked child
// leaves its parent's behind, its mutexes possibly held at the fork).
class Pool final : public SummaryThreads {
 public:
  Pool() : threads_(std::min(allowed_cores(), kMaxThreads)), pid_(::getpid()) {}

  pid_t pid() const { return pid_; }
  size_t threads() const override { return threads_; }

  void run(size_t n, const std::function<void(size_t)>& task) override {
    std::unique_lock<std::mutex> one_run(running_, std::try_to_lock);
    if (n <= 1 || threads_ <= 1 || !one_run.owns_lock() || !started()) {
      for (size_t i = 0; i < n; ++i) task(i);
      return;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    task_ = &task;
    count_ = n;
    next_.store(0, std::memory_order_relaxed);
    finished_ = 0;
    ++generation_;
    lock.unlock();
    wake_.notify_all();
    const size_t did = work(task, n);
    lock.lock();
    finished_ += did;
    done_.wait(lock, [&] { return finished_ == count_ && working_ == 0; });
    task_ = nullptr;
  }

 private:
  // Starts the helpers the first time; false when none could be.
  bool started() {
    if (started_) return helpers_ > 0;
    started_ = true;
    for (size_t i = 1; i < threads_; ++i) {
      try {
        std::thread([this] { serve(); }).detach();
        ++helpers_;
      } catch (const std::system_error&) {  // (a process out of threads: the caller does it all)
        break;
      }
    }
    return helpers_ > 0;
  }

  size_t work(const std::function<void(size_t)>& task, size_t n) {
    size_t did = 0;
    for (size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n; ++did) task(i);
    return did;
  }

  void serve() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (task_ == nullptr) continue;  // (woke after that run had ended)
      const auto* task = task_;
      const size_t n = count_;
      ++working_;
      lock.unlock();
      const size_t did = work(*task, n);
      lock.lock();
      finished_ += did;
      --working_;
      if (finished_ == count_ && working_ == 0) done_.notify_all();
    }
  }

  const size_t threads_;
  const pid_t pid_;
  std::mutex running_;  // one run at a time
  bool started_ = false;
  size_t helpers_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* task_ = nullptr;  // of the run going on
  size_t count_ = 0;
  std::atomic<size_t> next_{0};
  size_t finished_ = 0;
  size_t working_ = 0;  // helpers inside a run's tasks
  uint64_t generation_ = 0;
};

// The calling thread alone.
class Serial final : public SummaryThreads {
 public:
  size_t threads() const override { return 1; }
  void run(size_t n, const std::function<void(size_t)>& task) override {
    for (size_t i = 0; i < n; ++i) task(i);
  }
};

}  // namespace

SummaryThreads& summary_threads() {
  static std::atomic<Pool*> pool{nullptr};
  static std::mutex making;
  Pool* p = pool.load(std::memory_order_acquire);
  if (p != nullptr && p->pid() == ::getpid()) return *p;
  std::unique_lock<std::mutex> lock(making, std::try_to_lock);
  p = pool.load(std::memory_order_acquire);
  if (p != nullptr && p->pid() == ::getpid()) return *p;
  if (!lock.owns_lock()) {  // being made by another thread (or was, in the parent of this fork)
    static Serial serial;
    return serial;
  }
  p = new Pool();  // NOLINT: kept for good (see Pool)
  pool.store(p, std::memory_order_release);
  return *p;
}

std::vector<size_t> split_ranges(size_t n, size_t parts, size_t smallest, size_t block) {
  smallest = std::max<size_t>(smallest, 1);
  block = std::max<size_t>(block, 1);
  size_t ranges = std::max<size_t>(1, std::min(parts, n / smallest));
  const size_t blocks = (n + block - 1) / block;
  ranges = std::min(ranges, std::max<size_t>(blocks, 1));
  std::vector<size_t> at(ranges + 1, n);
  for (size_t i = 0; i < ranges; ++i) at[i] = std::min(n, blocks * i / ranges * block);
  return at;
}

}  // namespace tensorscope
