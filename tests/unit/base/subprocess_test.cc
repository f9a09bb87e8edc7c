// subprocess_test.cc — run_subprocess: stdout and stderr captured apart, exit statuses,
// a program that does not exist, the environment given or inherited, stdin at end of
// file, a deadline that kills the program and what it started, stdout cut at its bound,
// and large outputs on both pipes read without a deadlock.
#include "tensorscope/base/subprocess.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace tensorscope {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

SubprocessResult run(const std::vector<std::string>& argv, const SubprocessOptions& options = {}) {
  StatusOr<SubprocessResult> r = run_subprocess(argv, options);
  EXPECT_TRUE(r.is_ok()) << r.message();
  return r.is_ok() ? std::move(r).value() : SubprocessResult{};
}

TEST(Subprocess, CapturesStdout) {
  const SubprocessResult r = run({"/bin/echo", "hello", "world"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "hello world\n");
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.truncated);
}

TEST(Subprocess, LooksTheProgramUpInPath) { EXPECT_EQ(run({"echo", "found"}).out, "found\n"); }

TEST(Subprocess, NonZeroExitAndStderrApart) {
  const SubprocessResult r = run({"/bin/sh", "-c", "echo out; echo oops >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_FALSE(r.timed_out);
}

TEST(Subprocess, KilledBySignalHasNoExitCode) {
  const SubprocessResult r = run({"/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_FALSE(r.timed_out);
}

TEST(Subprocess, AMissingProgramIsAnError) {
  StatusOr<SubprocessResult> r = run_subprocess({"/nonexistent/tensorscope-no-such-program"});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.message(), "cannot run /nonexistent/tensorscope-no-such-program: No such file or directory");
  StatusOr<SubprocessResult> in_path = run_subprocess({"tensorscope-no-such-program"});
  ASSERT_FALSE(in_path.is_ok());
  EXPECT_THAT(in_path.message(), HasSubstr("cannot run tensorscope-no-such-program"));
  EXPECT_FALSE(run_subprocess({}).is_ok());
}

TEST(Subprocess, EnvironmentGivenOrInherited) {
  SubprocessOptions options;
  options.env = std::vector<std::string>{"TENSORSCOPE_SUBPROCESS_TEST=1"};
  EXPECT_EQ(run({"/usr/bin/env"}, options).out, "TENSORSCOPE_SUBPROCESS_TEST=1\n");
  ASSERT_EQ(::setenv("TENSORSCOPE_SUBPROCESS_INHERITED", "yes", 1), 0);
  EXPECT_THAT(run({"/usr/bin/env"}).out, HasSubstr("TENSORSCOPE_SUBPROCESS_INHERITED=yes\n"));
  ::unsetenv("TENSORSCOPE_SUBPROCESS_INHERITED");
}

TEST(Subprocess, StdinIsAtEndOfFile) {
  const SubprocessResult r = run({"/bin/cat"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
}

// Whether process `pid` has exited (gone, or a zombie waiting for its reaper).
bool exited(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

// Runs a program that must be killed (no exit code) long before it would end by itself.
SubprocessResult run_until_killed(const std::vector<std::string>& argv, const SubprocessOptions& options) {
  const auto start = Clock::now();
  SubprocessResult r = run(argv, options);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.exit_code, -1);
  return r;
}

TEST(Subprocess, TimeoutKillsTheProgramAndWhatItStarted) {
  SubprocessOptions options;
  options.timeout_ms = 300;
  // The shell starts `sleep 10` and says its pid; both are killed at the deadline.
  const SubprocessResult r = run_until_killed({"/bin/sh", "-c", "sleep 10 & echo $!; wait"}, options);
  EXPECT_TRUE(r.timed_out);
  ASSERT_FALSE(r.out.empty());
  const std::string sleeper = r.out.substr(0, r.out.find('\n'));
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!exited(sleeper) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(exited(sleeper)) << "sleep " << sleeper << " still runs";
}

TEST(Subprocess, TimeoutOfAPlainSleep) {
  SubprocessOptions options;
  options.timeout_ms = 200;
  EXPECT_TRUE(run_until_killed({"/bin/sleep", "10"}, options).timed_out);
}

TEST(Subprocess, LargeOutputOnBothPipesDoesNotDeadlock) {
  // Far more than a pipe holds (64 KiB), on stderr first: the program would block on
  // stderr if only stdout were read.
  SubprocessOptions options;
  options.timeout_ms = 60000;
  options.max_stderr_bytes = 1000;
  const SubprocessResult r =
      run({"/bin/sh", "-c", "head -c 3000000 /dev/zero >&2; head -c 10000000 /dev/zero; echo end >&2"}, options);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.size(), 10000000u);
  EXPECT_EQ(r.out.find_first_not_of('\0'), std::string::npos);
  EXPECT_EQ(r.err.size(), 1000u);  // the rest read and dropped
}

TEST(Subprocess, StdoutPastItsBoundIsCutAndTheProgramKilled) {
  SubprocessOptions options;
  options.max_stdout_bytes = 1000;
  const SubprocessResult r = run_until_killed({"/bin/sh", "-c", "yes; sleep 10"}, options);
  EXPECT_TRUE(r.truncated);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out.size(), 1000u);
  EXPECT_EQ(r.out.substr(0, 4), "y\ny\n");
}

}  // namespace
}  // namespace tensorscope
