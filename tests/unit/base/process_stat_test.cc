// Tests of process_stat: parsing /proc/<pid>/stat (odd command names, bad texts) and
// reading a live process's state and CPU time.
#include "tensorscope/base/process_stat.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>

namespace tensorscope {
namespace {

TEST(ProcessStat, ParsesStateAndCpuTime) {
  const auto s =
      parse_process_stat("4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 120 0 0 0 37 5 0 0 20 0 3 0 100 0 0");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->cpu_ticks, 42u);
  EXPECT_FALSE(s->runnable());
  EXPECT_FALSE(s->stopped());
  EXPECT_TRUE(parse_process_stat("1 (x) t 0 0 0 0 -1 0 0 0 0 0 1 2")->stopped());
  EXPECT_TRUE(parse_process_stat("1 (x) D 0 0 0 0 -1 0 0 0 0 0 1 2")->runnable());
}

TEST(ProcessStat, RefusesOtherTexts) {
  EXPECT_FALSE(parse_process_stat("").has_value());
  EXPECT_FALSE(parse_process_stat("4242 no parentheses S 1").has_value());
  EXPECT_FALSE(parse_process_stat("4242 (short) S 1 2").has_value());
  EXPECT_FALSE(parse_process_stat("1 (x) SS 0 0 0 0 -1 0 0 0 0 0 1 2").has_value());
  EXPECT_FALSE(parse_process_stat("1 (x) S 0 0 0 0 -1 0 0 0 0 0 one 2").has_value());
}

TEST(ProcessStat, ReadsALiveProcess) {
  const auto self = read_process_stat(::getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->state, 'R');  // reading its own stat, it runs
  // CPU time advances while it spins (a clock tick is 10 ms of CPU; on a busy machine
  // that may take a while to get).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  volatile uint64_t sink = 0;
  std::optional<ProcessStat> later = self;
  while (later && later->cpu_ticks == self->cpu_ticks && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 1000000; ++i) sink = sink + 1;
    later = read_process_stat(::getpid());
  }
  ASSERT_TRUE(later.has_value());
  EXPECT_GT(later->cpu_ticks, self->cpu_ticks);

  // A stopped child says so; a reaped one is gone.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ::kill(child, SIGSTOP);
  bool stopped = false;
  for (int i = 0; i < 500 && !stopped; ++i) {  // up to 5 s on a busy machine
    const auto s = read_process_stat(child);
    stopped = s && s->stopped();
    if (!stopped) ::usleep(10000);
  }
  EXPECT_TRUE(stopped);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(read_process_stat(child).has_value());
  EXPECT_FALSE(read_process_stat(-1).has_value());
}

}  // namespace
}  // namespace tensorscope
