// SummaryThreads (client/core/summary_threads.h): every task of a run runs once, on up to
// threads() threads, before run() returns; callers on several threads at once each get
// all their tasks done; a run's tasks run at once; a forked child runs its own; split_ranges cuts whole blocks.
#include "summary_threads.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace tensorscope {
namespace {

TEST(SummaryThreads, EveryTaskRunsOnceBeforeRunReturns) {
  SummaryThreads& threads = summary_threads();
  ASSERT_GE(threads.threads(), 1u);
  ASSERT_LE(threads.threads(), SummaryThreads::kMaxThreads);
  for (size_t n : {0, 1, 2, 3, 8, 33}) {
    std::vector<std::atomic<int>> ran(n);
    std::mutex mutex;
    std::set<std::thread::id> on;
    threads.run(n, [&](size_t i) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      ran[i].fetch_add(1);
      std::lock_guard<std::mutex> lock(mutex);
      on.insert(std::this_thread::get_id());
    });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(ran[i].load(), 1) << "task " << i << " of " << n;
    EXPECT_LE(on.size(), threads.threads());
  }
}

TEST(SummaryThreads, TheTasksOfARunRunAtOnce) {
  if (summary_threads().threads() < 2) GTEST_SKIP() << "one core for this process";
  // Each task waits (10 s at most) until the other has begun: only two threads at once end
  // both before the deadline.
  std::atomic<int> begun{0};
  std::atomic<int> met{0};
  summary_threads().run(2, [&](size_t) {
    begun.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (begun.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (begun.load() == 2) met.fetch_add(1);
  });
  EXPECT_EQ(met.load(), 2);
}

TEST(SummaryThreads, CallersOnSeveralThreadsEachGetTheirTasksDone) {
  std::atomic<long> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 200; ++r) summary_threads().run(5, [&](size_t i) { total.fetch_add(long(i) + 1); });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4L * 200 * 15);
}

TEST(SummaryThreads, AForkedChildRunsItsOwn) {
  summary_threads().run(4, [](size_t) {});  // the parent's helpers started
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::atomic<int> ran{0};
    summary_threads().run(6, [&](size_t) { ran.fetch_add(1); });
    ::_exit(ran.load() == 6 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(SummaryThreads, SplitRangesCutsWholeBlocksOfAtLeastTheSmallest) {
  EXPECT_EQ(split_ranges(0, 4, 100, 10), (std::vector<size_t>{0, 0}));
  EXPECT_EQ(split_ranges(150, 4, 100, 10), (std::vector<size_t>{0, 150})) << "under twice the smallest: one";
  EXPECT_EQ(split_ranges(1000, 4, 100, 10), (std::vector<size_t>{0, 250, 500, 750, 1000}));
  EXPECT_EQ(split_ranges(1005, 2, 100, 10), (std::vector<size_t>{0, 500, 1005}));
  EXPECT_EQ(split_ranges(1000, 8, 300, 10), (std::vector<size_t>{0, 330, 660, 1000}));
  const std::vector<size_t> at = split_ranges(12345678, 8, 1 << 20, 4096);
  ASSERT_EQ(at.size(), 9u);
  for (size_t i = 1; i + 1 < at.size(); ++i) {
    EXPECT_EQ(at[i] % 4096, 0u);
    EXPECT_GE(at[i] - at[i - 1], size_t{1} << 20);
  }
  EXPECT_EQ(at.back(), 12345678u);
}

}  // namespace
}  // namespace tensorscope
