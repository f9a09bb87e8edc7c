// stall_test.cc — end-to-end: a daemon stopped and continued kills no worker, clients
// that never read their status reply do not stall the supervisor.
//
// Each test starts its own daemon(s) in a private temporary directory (runtime dir,
// session, output) and runs test_producer processes against them (integration_fixture.h).
#include "integration_fixture.h"

namespace tensorscope::itest {
namespace {

// 4a. The whole daemon stopped (SIGSTOP: a debugger, a frozen cgroup, a suspended
// laptop) for longer than the heartbeat timeout, then continued: the supervisor knows
// the stall was its own and kills no worker; the videos go on.
TEST_F(IntegrationTest, AStoppedDaemonKillsNoWorkerWhenContinued) {
  const std::string name = session("stop");
  const std::string config = tmp_.path() + "/stop.yaml";
  std::ofstream(config) << "log_level: info\nvideo: {width: 160, height: 120, fps: 10, max_frames: 20}\n"
                        << "supervisor: {heartbeat_interval_ms: 100, heartbeat_timeout_ms: 1500}\n";
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("stop"), 2, config);
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer = start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "3000", "--streams", "2", "--report-ms", "100"});
  ASSERT_NE(producer, nullptr);
  json last;
  ASSERT_TRUE(daemon->wait_status([&](const json& s) { return s.value("files", 0) >= 1; }, kSettleTimeout, &last));
  const pid_t group = daemon->process().pid();
  ASSERT_EQ(::kill(-group, SIGSTOP), 0);
  std::this_thread::sleep_for(4s);  // well past the 1.5 s heartbeat timeout
  ASSERT_EQ(::kill(-group, SIGCONT), 0);
  const uint64_t files_after = last.value("files", 0ULL);
  ASSERT_TRUE(daemon->wait_status([&](const json& s) { return s.value("files", 0ULL) > files_after + 2; },
                                  kSettleTimeout, &last))
      << last.dump(2);
  for (const auto& w : last["workers"]) EXPECT_EQ(u64(w, "restarts"), 0u) << w.dump();
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  ASSERT_TRUE(final_line(producer).is_object());
  release_producer(producer);
  terminate_daemon(daemon);
  EXPECT_THAT(daemon->log(), HasSubstr("the supervisor did not run for"));
  EXPECT_THAT(daemon->log(), ::testing::Not(HasSubstr("missed its heartbeat")));
  verify_session_dir(daemon->session_dir(), index_or_fail(daemon->session_dir()), /*every_video_listed=*/true);
}

// 4b. Local clients that ask for the status and never read the (large) reply do not
// stall the supervisor: `tensorscope status` still answers at once and no worker is
// killed.
TEST_F(IntegrationTest, ClientsThatNeverReadDoNotStallTheSupervisor) {
  const std::string name = session("slow");
  const std::string config = tmp_.path() + "/slow.yaml";
  std::ofstream(config) << "log_level: info\nvideo: {width: 160, height: 120, fps: 10, max_frames: 20}\n"
                        << "supervisor: {heartbeat_interval_ms: 100, heartbeat_timeout_ms: 1500}\n";
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("slow"), 2, config);
  ASSERT_NE(daemon, nullptr);
  // Two producers of 2500 streams each, one per worker: a status reply of about 250 KB
  // (a worker lists 2000 of its streams), more than a socket buffer holds.
  std::vector<ChildProcess*> producers;
  for (int rank : {0, 1}) {
    producers.push_back(start_producer(
        name, rank,
        {"--count", "2500", "--streams", "2500", "--max-elements", "4", "--ring-slots", "4096", "--stdin-control"}));
    ASSERT_NE(producers.back(), nullptr);
  }
  for (ChildProcess* p : producers) ASSERT_TRUE(final_line(p).is_object());
  json last;
  ASSERT_TRUE(daemon->wait_status([&](const json& s) { return s.dump().size() > 240000; }, kSettleTimeout, &last))
      << "the status stays small: " << last.dump().size() << " bytes";
  std::vector<int> silent;
  for (int k = 0; k < 6; ++k) {
    auto fd = connect_unix(session_socket_path(runtime_dir_, name));
    ASSERT_TRUE(fd.is_ok()) << fd.message();
    const int small = 1024;
    ::setsockopt(*fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    MessageChannel channel(::dup(*fd));
    ASSERT_TRUE(channel.send({{"type", "status"}}).is_ok());
    silent.push_back(*fd);  // never read
  }
  for (int round = 0; round < 3; ++round) {
    const auto t0 = Clock::now();
    const CommandResult r = run_cli({"status", "--session", name, "--runtime-dir", runtime_dir_, "--json"});
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(r.exit.code, 0) << r.err;
    // Waiting on the silent clients' replies in turn would take their 5 s reply deadline
    // each (30 s); the bound leaves a busy machine room for the 250 KB reply.
    EXPECT_LT(seconds, 10.0) << "status took " << seconds << " s with six silent clients";
  }
  std::this_thread::sleep_for(2s);  // past the heartbeat timeout
  ASSERT_TRUE(daemon->wait_status([](const json&) { return true; }, 5s, &last));
  for (const auto& w : last["workers"]) EXPECT_EQ(u64(w, "restarts"), 0u) << w.dump();
  for (int fd : silent) ::close(fd);
  for (ChildProcess* p : producers) release_producer(p);
  terminate_daemon(daemon, 120s);
  EXPECT_THAT(daemon->log(), ::testing::Not(HasSubstr("missed its heartbeat")));
}

}  // namespace
}  // namespace tensorscope::itest
