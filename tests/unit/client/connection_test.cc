// The client's start-up without a daemon: how big a segment it asks for when the runtime
// directory is short of space, where it looks for tensorscoped, that it does not wait
// when there is nothing to wait for, that autostart failures are a state and not an
// exception, and that hostile stream names reach stderr escaped and cut.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "bench_sink.h"
#include "connection.h"
#include "daemon_autostart.h"
#include "temp_dir.h"

namespace tensorscope {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

ClientOptions isolated(const testing::TempDir& dir) {
  return ClientOptions().session("unit").runtime_dir(dir.path() + "/run").shm_budget(4 << 20);
}

TEST(SegmentBudget, TheBudgetWhenItFitsInHalfTheFreeSpaceElseAPowerOfTwoThatDoes) {
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 24 * 1024 * kMiB), 128 * kMiB);
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 256 * kMiB), 128 * kMiB);
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 64 * kMiB), 32 * kMiB);   // Docker's default /dev/shm
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 63 * kMiB), 16 * kMiB);
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 2 * kMiB), 1 * kMiB);
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 2 * kMiB - 1), 0u) << "below the minimum: none";
  EXPECT_EQ(fitting_segment_budget(512 * 1024, 2 * kMiB), 512u * 1024) << "a small budget that fits stays";
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, UINT64_MAX), 128 * kMiB);
}

class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v, had_ = true;
  }
  ~EnvGuard() { had_ ? ::setenv(name_, old_.c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(DaemonExecutable, ConfiguredThenEnvironmentThenBesideTheProgram) {
  EnvGuard guard("TENSORSCOPE_DAEMON");
  testing::TempDir dir("ts-exe");
  const std::string fake = dir.path() + "/my-tensorscoped";
  std::ofstream(fake) << "#!/bin/sh\n";
  ::chmod(fake.c_str(), 0700);

  auto configured = find_daemon_executable(fake);
  ASSERT_TRUE(configured) << configured.message();
  EXPECT_EQ(*configured, fake);
  auto missing = find_daemon_executable(dir.path() + "/nope");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("daemon_executable"), std::string::npos) << missing.message();

  ::setenv("TENSORSCOPE_DAEMON", fake.c_str(), 1);
  auto from_env = find_daemon_executable("");
  ASSERT_TRUE(from_env) << from_env.message();
  EXPECT_EQ(*from_env, fake);
  ::setenv("TENSORSCOPE_DAEMON", (dir.path() + "/nope").c_str(), 1);
  auto bad_env = find_daemon_executable("");
  ASSERT_FALSE(bad_env);
  EXPECT_NE(bad_env.message().find("TENSORSCOPE_DAEMON"), std::string::npos) << bad_env.message();

  // The test program lives in build/bin beside tensorscoped.
  ::unsetenv("TENSORSCOPE_DAEMON");
  auto beside = find_daemon_executable("");
  ASSERT_TRUE(beside) << beside.message();
  EXPECT_EQ(beside->substr(beside->size() - std::string("/tensorscoped").size()), "/tensorscoped");
  EXPECT_EQ(::access(beside->c_str(), X_OK), 0);
}

TEST(ClientStart, WithoutADaemonSocketTheConstructorDoesNotWait) {
  testing::TempDir dir("ts-client");
  const auto start = std::chrono::steady_clock::now();
  Client client(isolated(dir).connect_timeout_ms(20000));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(5)) << "it waited for a daemon that is not there";
  EXPECT_EQ(client.push("x", torch::ones({2})), PushResult::kNotConnected);
  const ClientStats s = client.stats();
  EXPECT_NE(s.connection_note.find("no daemon for session 'unit'"), std::string::npos) << s.connection_note;
  EXPECT_EQ(s.autostart, "");
}

TEST(ClientStart, AnAutostartThatCannotFindTheDaemonIsAStateNotAnException) {
  testing::TempDir dir("ts-client");
  const auto start = std::chrono::steady_clock::now();
  Client client(isolated(dir)
                    .autostart(true)
                    .daemon_executable(dir.path() + "/no-such-tensorscoped")
                    .autostart_output(dir.path() + "/out")
                    .connect_timeout_ms(20000));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
      << "a launch that failed for good must end the constructor's wait";
  EXPECT_EQ(client.push("x", torch::ones({2})), PushResult::kNotConnected);
  const ClientStats s = client.stats();
  EXPECT_NE(s.autostart.find("autostart failed"), std::string::npos) << s.autostart;
  EXPECT_NE(s.autostart.find("not retried"), std::string::npos) << s.autostart;
  EXPECT_FALSE(s.connected);
}

// Runs `body` with stderr sent to a file and returns what it wrote.
template <typename Body>
std::string captured_stderr(const testing::TempDir& dir, Body body) {
  const std::string path = dir.path() + "/stderr.txt";
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 2);
  ::close(fd);
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ClientLog, HostileStreamNamesAreEscapedAndCut) {
  testing::TempDir dir("ts-client");
  bench::BenchSink sink(dir.path() + "/run", "unit");
  ASSERT_TRUE(sink.start());
  Client client(isolated(dir));  // waits for the registration: its socket exists
  ASSERT_TRUE(client.connected());
  std::string hostile = "evil\n[2026-01-01] [tensorscope] [info] forged line\x1b[2J\x1b]0;title\x07";
  hostile += std::string(65536, 'A');
  const std::string err = captured_stderr(dir, [&] {
    EXPECT_EQ(client.push(hostile, torch::ones({1})), PushResult::kRefused);
  });
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << "escape sequences reached the terminal";
  EXPECT_EQ(err.find('\x07'), std::string::npos);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_LT(err.size(), 1024u) << "the 64 KiB name was not cut";
  EXPECT_NE(err.find("\\x0a[2026-01-01]"), std::string::npos) << err;
}

}  // namespace
}  // namespace tensorscope
