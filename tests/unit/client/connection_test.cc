// The client's start-up without a daemon: how big a segment it asks for when the runtime
// directory is short of space, where it looks for tensorscoped, that it does not wait
// when there is nothing to wait for, that autostart failures are a state and not an
// exception, and that hostile stream names reach stderr escaped and cut.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "fake_daemon.h"
#include "captured_stderr.h"
#include "connection.h"
#include "runtime_dir_watch.h"
#include "daemon_autostart.h"
#include "dir_listing.h"
#include "temp_dir.h"
#include "tensorscope/shared/daemon_exit_status.h"
#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/runtime_paths.h"

namespace tensorscope {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

ClientOptions isolated(const testing::TempDir& dir) {
  return ClientOptions().session("unit").runtime_dir(dir.path() + "/run").shm_budget(4 << 20);
}

TEST(SegmentBudget, HalfTheFreeSpaceAQuarterAtMost4GiBLeftFreeAndAShareOfHalfPerLocalRank) {
  const uint64_t GiB = 1024 * kMiB;
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 24 * GiB, 24 * GiB, 1), 128 * kMiB);
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 24 * GiB, 24 * GiB, 8), 128 * kMiB);
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 64 * kMiB, 64 * kMiB, 1), 32 * kMiB);  // Docker's /dev/shm
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 32 * kMiB, 64 * kMiB, 1), 16 * kMiB);  // a second producer
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 16 * kMiB, 64 * kMiB, 1), 0u) << "a quarter stays free";
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 64 * kMiB, 64 * kMiB, 4), 8 * kMiB);   // LOCAL_WORLD_SIZE=4
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 40 * kMiB, 64 * kMiB, 4), 8 * kMiB);   // the fourth of them
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 63 * kMiB, 64 * kMiB, 1), 16 * kMiB);  // powers of two
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 2 * kMiB, 2 * kMiB, 1), 1 * kMiB);
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, 1 * kMiB, 1 * kMiB, 1), 0u) << "below the minimum: none";
  EXPECT_EQ(fitting_segment_budget(512 * 1024, 2 * kMiB, 2 * kMiB, 1), 512u * 1024) << "a small budget that fits";
  EXPECT_EQ(fitting_segment_budget(128 * kMiB, UINT64_MAX, UINT64_MAX, 1), 128 * kMiB) << "unknown: the budget";
  // A large disk under /tmp, a quarter of it free: at most 4 GiB stays free for others.
  EXPECT_EQ(fitting_segment_budget(64 * kMiB, 63 * GiB, 252 * GiB, 1), 64 * kMiB);
  EXPECT_EQ(fitting_segment_budget(16 * GiB, 10 * GiB, 252 * GiB, 1), 4 * GiB) << "half the free space";
  EXPECT_EQ(fitting_segment_budget(16 * GiB, 5 * GiB, 252 * GiB, 1), 1024 * kMiB) << "4 GiB kept free";
  EXPECT_EQ(kept_free_bytes(64 * kMiB), 16 * kMiB);
  EXPECT_EQ(kept_free_bytes(252 * GiB), 4 * GiB);
}

TEST(RuntimeDirWatch, WakesForTheWatchedNameOnlyAndForTheWakeDescriptor) {
  testing::TempDir dir("ts-watch");
  RuntimeDirWatch watch(dir.path(), "s.sock");
  ASSERT_TRUE(watch.active());
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ofstream(dir.path() + "/s.sock.other") << "x";  // prefixes and other files do not count
    std::ofstream(dir.path() + "/s.lock") << "x";
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(watch.wait(wake, 300));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(290)) << "cut short by other files";
  other.join();
  std::thread appear([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ofstream(dir.path() + "/.s.sock.tmp") << "x";
    (void)::rename((dir.path() + "/.s.sock.tmp").c_str(), (dir.path() + "/s.sock").c_str());
  });
  EXPECT_TRUE(watch.wait(wake, 60000));
  appear.join();
  const uint64_t one = 1;
  ASSERT_EQ(::write(wake, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  EXPECT_FALSE(watch.wait(wake, 60000)) << "the wake descriptor ends the wait";
  ::close(wake);
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

TEST(DaemonExecutable, ConfiguredThenEnvironment) {
  EnvGuard guard("TENSORSCOPE_DAEMON");
  testing::TempDir dir("ts-exe");
  const std::string fake = dir.path() + "/my-tensorscoped";
  std::ofstream(fake) << "#!/bin/sh\n";
  ::chmod(fake.c_str(), 0700);

  auto configured = find_daemon_executable(DaemonSearch::from_environment(fake));
  ASSERT_TRUE(configured) << configured.message();
  EXPECT_EQ(*configured, fake);
  auto missing = find_daemon_executable(DaemonSearch::from_environment(dir.path() + "/nope"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("daemon_executable"), std::string::npos) << missing.message();

  ::setenv("TENSORSCOPE_DAEMON", fake.c_str(), 1);
  auto from_env = find_daemon_executable(DaemonSearch::from_environment(""));
  ASSERT_TRUE(from_env) << from_env.message();
  EXPECT_EQ(*from_env, fake);
  ::setenv("TENSORSCOPE_DAEMON", (dir.path() + "/nope").c_str(), 1);
  auto bad_env = find_daemon_executable(DaemonSearch::from_environment(""));
  ASSERT_FALSE(bad_env);
  EXPECT_NE(bad_env.message().find("TENSORSCOPE_DAEMON"), std::string::npos) << bad_env.message();
}

TEST(DaemonExecutable, BesideTheProgram) {
  // The test program lives in build/bin beside tensorscoped (not in a build of the client
  // alone, TENSORSCOPE_BUILD_DAEMON=OFF).
  if (!TENSORSCOPE_DAEMON_BUILT) GTEST_SKIP() << "this build has no tensorscoped";
  EnvGuard guard("TENSORSCOPE_DAEMON");
  ::unsetenv("TENSORSCOPE_DAEMON");
  auto beside = find_daemon_executable(DaemonSearch::from_environment(""));
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

// A daemon that refuses every registration: the client tries again only after its
// backoff, however much happens in the runtime directory meanwhile (its own segments
// come and go there at every try).
TEST(ClientStart, ARefusedRegistrationIsRetriedAfterTheBackoffNotInALoop) {
  testing::TempDir dir("ts-client");
  const std::string run = dir.path() + "/run";
  ASSERT_TRUE(ensure_private_dir(run));
  auto listener = listen_unix(session_socket_path(run, "unit"));
  ASSERT_TRUE(listener) << listener.message();
  std::atomic<int> registrations{0};
  std::atomic<bool> stop{false};
  std::thread refuser([&] {
    while (!stop.load()) {
      pollfd p{*listener, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(*listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      MessageChannel channel(fd);
      auto hello = channel.receive(2000);
      if (hello && hello->value("type", "") == "register") ++registrations;
      (void)channel.send({{"type", "error"}, {"message", "refused by the test"}});
    }
  });
  {
    Client client(isolated(dir).reconnect_interval_ms(10));
    std::this_thread::sleep_for(std::chrono::seconds(3));
    EXPECT_GE(registrations.load(), 1);
    EXPECT_LE(registrations.load(), 2) << "registrations repeated without the backoff";
    const ClientStats s = client.stats();
    EXPECT_NE(s.connection_note.find("refused by the test"), std::string::npos) << s.connection_note;
    EXPECT_EQ(s.connections, 0u);
  }
  stop.store(true);
  refuser.join();
  ::close(*listener);
}

// Two clients with autostart in one process (two ranks' worth of locking): when the
// daemon cannot be found, both end with the failure, neither waits for the other forever.
TEST(ClientStart, ClientsWhoseAutostartFailsDoNotWaitForEachOtherForever) {
  testing::TempDir dir("ts-client");
  auto options = isolated(dir)
                     .autostart(true)
                     .daemon_executable(dir.path() + "/no-such-tensorscoped")
                     .autostart_output(dir.path() + "/out")
                     .connect_timeout_ms(0);
  Client a(options), b(options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto final_state = [](const Client& c) { return c.stats().autostart.find("not retried") != std::string::npos; };
  while (!(final_state(a) && final_state(b)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(final_state(a)) << a.stats().autostart;
  EXPECT_TRUE(final_state(b)) << b.stats().autostart;
}

// The launcher connected to the daemon it started before that daemon's launching process
// was seen to exit (a busy machine): it says it started it, and the launching process's
// later outcome still refines that (here: another daemon had won the session).
TEST(DaemonAutostart, ConnectedBeforeTheLauncherExitedSaysItStartedTheDaemon) {
  testing::TempDir dir("ts-auto");
  const std::string go = dir.path() + "/go";
  const std::string fake = dir.path() + "/slow-tensorscoped";
  std::ofstream(fake) << "#!/bin/sh\nwhile [ ! -e '" << go << "' ]; do sleep 0.02; done\nexit "
                      << kDaemonExitAlreadyRunning << "\n";
  ::chmod(fake.c_str(), 0700);
  DaemonAutostart autostart({fake, "", dir.path() + "/out", "unit", dir.path() + "/run", /*idle_exit_ms=*/1000});
  int64_t now = 1000;
  EXPECT_FALSE(autostart.step(now));
  EXPECT_TRUE(autostart.in_progress());
  EXPECT_EQ(autostart.state().rfind("starting " + fake, 0), 0u) << autostart.state();

  autostart.on_connected(now += 10);
  EXPECT_EQ(autostart.state().rfind("started tensorscoped (log ", 0), 0u) << autostart.state();
  EXPECT_TRUE(autostart.in_progress()) << "its outcome is still to be collected";

  std::ofstream(go) << "";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (autostart.in_progress() && std::chrono::steady_clock::now() < deadline) {
    autostart.poll(now += 10);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(autostart.in_progress());
  EXPECT_EQ(autostart.state(), "a daemon started by another process serves the session");
}

// Two clients of one session in one process (a notebook cell run twice): two segments,
// neither replacing the other's file.
TEST(ClientStart, TwoClientsOfOneSessionInOneProcessKeepTheirOwnSegments) {
  testing::TempDir dir("ts-client");
  std::atomic<int> records{0};
  testing::FakeDaemon sink(dir.path() + "/run", "unit", [&](const RecordView&) { ++records; });
  ASSERT_TRUE(sink.start());
  Client a(isolated(dir).connect_timeout_ms(20000)), b(isolated(dir).connect_timeout_ms(20000));
  ASSERT_TRUE(a.connected());
  ASSERT_TRUE(b.connected());
  size_t segments = 0;
  for (const std::string& name : testing::list_dir(dir.path() + "/run")) {
    segments += segment_file_pid(name) == ::getpid() ? 1 : 0;
  }
  EXPECT_EQ(segments, 2u);
  EXPECT_EQ(a.push("x", torch::ones({4})), PushResult::kPushed);
  EXPECT_EQ(b.push("x", torch::ones({4})), PushResult::kPushed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (records.load() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(records.load(), 2);
}

// A daemon slow to answer the registration (a busy machine): the constructor stops waiting
// after connect_timeout_ms, and the pushes after it wait in the segment's ring until the
// daemon reads them. None is lost, and each arrives as pushed.
TEST(ClientStart, PushesWaitInTheRingForADaemonSlowToRegister) {
  testing::TempDir dir("ts-client");
  std::mutex mutex;
  std::vector<int64_t> steps;
  testing::FakeDaemon sink(dir.path() + "/run", "unit", [&](const RecordView& v) {
    std::lock_guard<std::mutex> lock(mutex);
    steps.push_back(v.header.step);
  });
  sink.set_registration(std::chrono::milliseconds(1500));
  ASSERT_TRUE(sink.start());
  Client client(isolated(dir).connect_timeout_ms(100));
  EXPECT_FALSE(client.connected()) << "the daemon answered before its delay";
  for (int step = 0; step < 20; ++step) {
    client.set_step(step);
    EXPECT_EQ(client.push("early", torch::full({64}, static_cast<float>(step))), PushResult::kPushed) << step;
  }
  ASSERT_TRUE(testing::wait_connected(client, std::chrono::seconds(60)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (sink.received() < 20 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<int64_t> expected(20);
  for (int i = 0; i < 20; ++i) expected[static_cast<size_t>(i)] = i;
  EXPECT_EQ(steps, expected);
  const ClientStats s = client.stats();
  EXPECT_EQ(s.pushed, 20u);
  EXPECT_EQ(s.not_connected, 0u);
}

// The same pushes, for a daemon that then refuses the producer: counted as not connected
// once the segment they waited in is given up, not as pushed.
TEST(ClientStart, PushesThatWaitedForARefusingDaemonCountAsNotConnected) {
  testing::TempDir dir("ts-client");
  testing::FakeDaemon sink(dir.path() + "/run", "unit");
  sink.set_registration(std::chrono::milliseconds(800), /*refuse=*/true);
  ASSERT_TRUE(sink.start());
  Client client(isolated(dir).connect_timeout_ms(100));
  for (int i = 0; i < 10; ++i) client.push("early", torch::ones({16}));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (client.stats().not_connected < 10 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const ClientStats s = client.stats();
  EXPECT_EQ(s.not_connected, 10u) << s.connection_note;
  EXPECT_EQ(s.pushed, 0u);
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_NE(s.connection_note.find("refused"), std::string::npos) << s.connection_note;
}

TEST(ClientLog, HostileStreamNamesAreEscapedAndCut) {
  testing::TempDir dir("ts-client");
  testing::FakeDaemon sink(dir.path() + "/run", "unit");
  ASSERT_TRUE(sink.start());
  Client client(isolated(dir).connect_timeout_ms(20000));  // waits for the registration: its socket exists
  ASSERT_TRUE(client.connected());
  std::string hostile = "evil\n[2026-01-01] [tensorscope] [info] forged line\x1b[2J\x1b]0;title\x07";
  hostile += std::string(65536, 'A');
  const std::string err =
      testing::captured_stderr([&] { EXPECT_EQ(client.push(hostile, torch::ones({1})), PushResult::kRefused); });
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << "escape sequences reached the terminal";
  EXPECT_EQ(err.find('\x07'), std::string::npos);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_LT(err.size(), 1024u) << "the 64 KiB name was not cut";
  EXPECT_NE(err.find("\\x0a[2026-01-01]"), std::string::npos) << err;
}

}  // namespace
}  // namespace tensorscope
