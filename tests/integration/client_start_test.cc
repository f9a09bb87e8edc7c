// client_start_test.cc — what happens to a training process at start-up, with real
// processes: a runtime directory smaller than the segment (Docker's 64 MiB /dev/shm),
// the first pushes of a producer started after the daemon, a daemon started after the
// producer, autostart by several ranks at once, leftovers of killed processes, and
// hostile input in log lines. The training stand-in is test_producer; its JSON lines
// carry the client's counters and notes.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "daemon_process.h"
#include "video_frames.h"
#include "process_fixture.h"
#include "small_tmpfs.h"
#include "temp_dir.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/segment_cleanup.h"

namespace tensorscope::itest {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::slurp;
using namespace std::chrono_literals;

constexpr Millis kStartTimeout = 30s;
constexpr Millis kProducerTimeout = 240s;
constexpr Millis kExitTimeout = 90s;
constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t u64(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<uint64_t>() : 0;
}

uint64_t free_bytes(const std::string& dir) {
  struct statvfs fs {};
  return ::statvfs(dir.c_str(), &fs) == 0 ? static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize : 0;
}

bool process_alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

std::vector<std::string> segment_files(const std::string& dir) {
  return list_dir(dir, [](const std::string& n) { return segment_file_pid(n) > 0; });
}

// Supervisors (not workers) of `session` running now, found by their command lines.
std::vector<pid_t> supervisors_of(const std::string& session) {
  std::map<pid_t, pid_t> candidates;  // pid -> parent pid
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = slurp(e.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    // Workers run with --worker-fd; the supervisor's helpers (run_info's git) are named apart.
    if (slurp(e.path().string() + "/comm") != "tensorscoped\n") continue;
    if (cmdline.find("--worker-fd") == std::string::npos &&
        cmdline.find("--session " + session + " ") != std::string::npos) {
      const std::string stat = slurp(e.path().string() + "/stat");  // pid (comm) state ppid ...
      const size_t close = stat.rfind(')');
      pid_t parent = 0;
      if (close != std::string::npos) std::sscanf(stat.c_str() + close + 1, " %*c %d", &parent);
      candidates[static_cast<pid_t>(std::stol(name))] = parent;
    }
  }
  // A helper the supervisor just forked carries its name and command line until it
  // renames itself or execs: a child of a candidate is not a second daemon.
  std::vector<pid_t> found;
  for (const auto& [pid, parent] : candidates) {
    if (candidates.count(parent) == 0) found.push_back(pid);
  }
  return found;
}

class ClientStartTest : public ProcessFixture {
 protected:
  ClientStartTest() : ProcessFixture("ts-start") {}

  void SetUp() override {
    ProcessFixture::SetUp();
    config_ = tmp_.path() + "/config.yaml";
    std::ofstream(config_) << "video:\n  width: 160\n  height: 120\n  fps: 10\n  max_frames: 1000\n"
                           << "supervisor:\n  heartbeat_interval_ms: 100\n  heartbeat_timeout_ms: 10000\n"
                           // The shared-memory sizes these tests expect are the producers' alone.
                           << "live:\n  max_fps: 0\n";
  }

  void TearDown() override {
    ProcessFixture::TearDown();
    for (pid_t pid : detached_) {  // autostarted daemons live in sessions of their own
      if (process_alive(pid)) ::kill(-pid, SIGKILL), ::kill(pid, SIGKILL);
    }
  }

  DaemonProcess* start_daemon(const std::string& name, const std::string& runtime_dir) {
    return ProcessFixture::start_daemon({"", config_, runtime_dir, name, tmp_.path() + "/out", 1, ""});
  }

  DaemonProcess* start_ready_daemon(const std::string& name, const std::string& runtime_dir) {
    return ProcessFixture::start_ready_daemon({"", config_, runtime_dir, name, tmp_.path() + "/out", 1, ""},
                                              kStartTimeout);
  }

  ChildProcess* start_producer(const std::string& name, const std::string& runtime_dir, int rank,
                               const std::vector<std::string>& extra, const std::vector<std::string>& env = {}) {
    std::vector<std::string> args = {"--session",          name,     "--runtime-dir",         runtime_dir, "--rank",
                                     std::to_string(rank), "--seed", std::to_string(7 + rank)};
    args.insert(args.end(), extra.begin(), extra.end());
    return ProcessFixture::start_producer(args, env);
  }

  static json final_line(ChildProcess* p) { return ProcessFixture::final_line(p, kProducerTimeout); }

  std::string config_;
  std::vector<pid_t> detached_;
};

// The scenario of Docker's default /dev/shm: a 64 MiB runtime directory, the default
// 128 MiB shm_budget, a CNN trained 600 steps with every step tracked. Without reserved
// segments the training died of SIGBUS (exit 135) and left a 128 MiB segment filling the
// tmpfs. Now it gets a 32 MiB segment and exits 0; then four ranks of one machine
// (LOCAL_WORLD_SIZE=4, as torchrun sets it) started together get 8 MiB each, leaving
// half of the tmpfs to others.
TEST_F(ClientStartTest, SmallRuntimeDirectoryNeverKillsTheTraining) {
  testing::SmallTmpfs tmpfs("64m");
  if (!tmpfs.mounted()) GTEST_SKIP() << tmpfs.why();
  const std::string name = session("shm");
  DaemonProcess* daemon = start_ready_daemon(name, tmpfs.path());
  ASSERT_NE(daemon, nullptr);
  const std::vector<std::string> train = {"--track-model",
                                          "--count",
                                          "600",
                                          "--every-n",
                                          "1",
                                          "--budget",
                                          std::to_string(128 * kMiB),
                                          "--wait-connect-ms",
                                          "0",
                                          "--connect-timeout-ms",
                                          "20000"};
  auto check = [&](ChildProcess* p, uint64_t expected_bytes) {
    const json line = final_line(p);
    ASSERT_TRUE(line.is_object()) << "no final line from producer " << p->pid();
    SCOPED_TRACE(line.dump());
    EXPECT_EQ(u64(line, "connections"), 1u);
    EXPECT_EQ(u64(line, "not_connected"), 0u);
    EXPECT_EQ(u64(line, "refused"), 0u);
    EXPECT_GT(u64(line, "pushed"), 600u);
    EXPECT_EQ(u64(line, "shm_bytes"), expected_bytes);
    EXPECT_THAT(line.value("shm_note", ""), HasSubstr("instead of the 128 MiB shm_budget"));
    release_producer(p);
  };
  ChildProcess* alone = start_producer(name, tmpfs.path(), 0, train);
  ASSERT_NE(alone, nullptr);
  check(alone, 32 * kMiB);
  EXPECT_THAT(segment_files(tmpfs.path()), ::testing::IsEmpty()) << "segments left in the tmpfs";
  // Its 32 MiB come back once the daemon has let go of the segment too.
  ASSERT_TRUE(daemon->wait_status([](const json& s) { return s.value("producers", json::array()).empty(); }, 30s));
  ASSERT_TRUE(wait_until([&] { return free_bytes(tmpfs.path()) == 64 * kMiB; }, 30s)) << free_bytes(tmpfs.path());

  std::vector<ChildProcess*> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    ranks.push_back(start_producer(name, tmpfs.path(), rank, train, {"LOCAL_WORLD_SIZE=4"}));
    ASSERT_NE(ranks.back(), nullptr);
  }
  for (ChildProcess* p : ranks) check(p, 8 * kMiB);
  EXPECT_THAT(segment_files(tmpfs.path()), ::testing::IsEmpty());
  auto status = daemon->status();
  ASSERT_TRUE(status) << status.message();
  EXPECT_EQ(status->value("registrations_refused", -1), 0);
}

TEST_F(ClientStartTest, ARuntimeDirectoryWithNoRoomLeavesTheTrainingRunningAndSaysWhy) {
  testing::SmallTmpfs tmpfs("1m");
  if (!tmpfs.mounted()) GTEST_SKIP() << tmpfs.why();
  const std::string name = session("tiny");
  ASSERT_NE(start_ready_daemon(name, tmpfs.path()), nullptr);
  // The constructor waits until the first attempt is over: its notes are in the last line.
  ChildProcess* p = start_producer(name, tmpfs.path(), 0,
                                   {"--count", "200", "--wait-connect-ms", "0", "--connect-timeout-ms", "20000"});
  ASSERT_NE(p, nullptr);
  const json line = final_line(p);
  ASSERT_TRUE(line.is_object());
  EXPECT_EQ(u64(line, "connections"), 0u) << line.dump();
  EXPECT_EQ(u64(line, "not_connected"), 200u) << line.dump();
  EXPECT_THAT(line.value("shm_note", ""), HasSubstr("no tensors can be sent"));
  EXPECT_THAT(line.value("connection_note", ""), HasSubstr("free"));
  release_producer(p);
}

// A daemon answering status before the producers start: no push of theirs is lost as
// not connected (the constructor waits for the registration).
TEST_F(ClientStartTest, ProducersStartedAfterTheDaemonLoseNoPush) {
  const std::string name = session("first");
  ASSERT_NE(start_ready_daemon(name, runtime_dir_), nullptr);
  std::vector<ChildProcess*> producers;
  for (int rank = 0; rank < 4; ++rank) {
    producers.push_back(start_producer(name, runtime_dir_, rank,
                                       {"--count", "100", "--sleep-us", "2000", "--streams", "2", "--wait-connect-ms",
                                        "0", "--connect-timeout-ms", "20000"}));
    ASSERT_NE(producers.back(), nullptr);
  }
  for (ChildProcess* p : producers) {
    const json line = final_line(p);
    ASSERT_TRUE(line.is_object());
    EXPECT_EQ(u64(line, "not_connected"), 0u) << line.dump();
    EXPECT_EQ(u64(line, "pushed") + u64(line, "dropped_full") + u64(line, "gated"), 100u) << line.dump();
    release_producer(p);
  }
}

// The producer polls only every 10 minutes: it connects at once anyway, because it
// watches the runtime directory for the daemon's socket.
TEST_F(ClientStartTest, ADaemonStartedLaterIsNoticedAtOnce) {
  const std::string name = session("late");
  ChildProcess* p = start_producer(name, runtime_dir_, 0,
                                   {"--count", "0", "--stdin-control", "--sleep-us", "2000", "--report-ms", "20",
                                    "--wait-connect-ms", "0", "--reconnect-ms", "600000"});
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(wait_json_line(
                  *p, [](const json& j) { return u64(j, "not_connected") > 10; }, kStartTimeout)
                  .is_object());
  DaemonProcess* daemon = start_ready_daemon(name, runtime_dir_);
  ASSERT_NE(daemon, nullptr);
  const auto ready = Clock::now();
  const json connected = wait_json_line(
      *p, [](const json& j) { return j.value("connected", false); }, 60s);
  ASSERT_TRUE(connected.is_object()) << "the producer did not notice the daemon";
  EXPECT_LT(Clock::now() - ready, 20s);
  release_producer(p);
}

// Four ranks with autostart, started together and no daemon: exactly one daemon comes up,
// detached, serves all four, says it was autostarted, and exits by itself once they are
// gone, leaving every video finished and listed.
TEST_F(ClientStartTest, AutostartFourRanksOneDaemonThatExitsWhenIdle) {
  const std::string name = session("auto");
  const std::string output = tmp_.path() + "/runs";
  std::vector<ChildProcess*> producers;
  for (int rank = 0; rank < 4; ++rank) {
    producers.push_back(start_producer(
        name, runtime_dir_, rank,
        {"--count", "40", "--sleep-us", "2000", "--streams", "2", "--stdin-control", "--wait-connect-ms", "0",
         "--autostart", "--autostart-output", output, "--idle-exit-ms", "1500", "--connect-timeout-ms", "20000"}));
    ASSERT_NE(producers.back(), nullptr);
  }
  std::map<int, json> lines;
  int launchers = 0;
  for (int rank = 0; rank < 4; ++rank) {
    lines[rank] = final_line(producers[static_cast<size_t>(rank)]);
    ASSERT_TRUE(lines[rank].is_object());
    EXPECT_EQ(u64(lines[rank], "not_connected"), 0u) << lines[rank].dump();
    EXPECT_EQ(u64(lines[rank], "connections"), 1u) << lines[rank].dump();
    const std::string state = lines[rank].value("autostart", "");
    EXPECT_EQ(state.find("waiting"), std::string::npos) << state;
    EXPECT_EQ(state.find("failed"), std::string::npos) << state;
    launchers += state.rfind("started tensorscoped", 0) == 0 ? 1 : 0;
  }
  EXPECT_GE(launchers, 1) << "no rank says it started the daemon";
  auto status = query_status(session_socket_path(runtime_dir_, name));
  ASSERT_TRUE(status) << status.message();
  const pid_t daemon_pid = static_cast<pid_t>(status->value("pid", 0LL));
  detached_.push_back(daemon_pid);
  EXPECT_TRUE(status->value("autostarted", false));
  EXPECT_EQ(status->value("idle_exit_ms", 0), 1500);
  EXPECT_EQ(status->value("producers", json::array()).size(), 4u);
  EXPECT_EQ(supervisors_of(name), std::vector<pid_t>{daemon_pid}) << "one daemon for the session";
  // Detached: its own session, not a child of any producer.
  EXPECT_EQ(::getsid(daemon_pid), daemon_pid);
  CommandResult table =
      run_command({TENSORSCOPE_CLI_PATH, "status", "--session", name, "--runtime-dir", runtime_dir_}, logs_, 30s);
  EXPECT_THAT(table.out, HasSubstr("autostarted by a client"));

  for (ChildProcess* p : producers) release_producer(p);
  ASSERT_TRUE(wait_until([&] { return !process_alive(daemon_pid); }, kExitTimeout))
      << "the autostarted daemon did not exit once idle";
  const std::string session_dir = output + "/" + name;
  EXPECT_THAT(slurp(session_dir + "/tensorscoped.log"), HasSubstr("exiting"));
  auto files = read_index(session_dir);
  ASSERT_TRUE(files) << files.message();
  std::map<std::string, int64_t> listed;  // "<stream>@<rank>" -> frames
  for (const auto& f : *files) {
    const std::string path = session_dir + "/" + f.value("path", "");
    EXPECT_EQ(count_decodable_frames(path), f.value("frames", int64_t{-1})) << path;
    listed[f.value("stream", "") + "@" + std::to_string(f.value("rank", -1))] += f.value("frames", int64_t{0});
  }
  for (const auto& [rank, line] : lines) {
    const json per_stream = line.value("per_stream", json::object());
    ASSERT_FALSE(per_stream.empty());
    for (const auto& [stream, n] : per_stream.items()) {
      EXPECT_EQ(listed[stream + "@" + std::to_string(rank)], n.get<int64_t>()) << stream << " rank " << rank;
    }
  }
  EXPECT_THAT(segment_files(runtime_dir_), ::testing::IsEmpty());
}

// The daemon a rank starts itself comes up long after the constructor stopped waiting
// (here 50 ms): the first pushes wait in the segment's ring for it, none is lost.
TEST_F(ClientStartTest, AnAutostartedDaemonSlowerThanTheConstructorLosesNoFirstPush) {
  const std::string name = session("slowstart");
  const std::string output = tmp_.path() + "/runs";
  ChildProcess* p = start_producer(
      name, runtime_dir_, 0,
      {"--count", "60", "--sleep-us", "1000", "--streams", "2", "--stdin-control", "--wait-connect-ms", "0",
       "--autostart", "--autostart-output", output, "--idle-exit-ms", "1500", "--connect-timeout-ms", "50"});
  ASSERT_NE(p, nullptr);
  const json line = final_line(p);
  ASSERT_TRUE(line.is_object());
  EXPECT_EQ(u64(line, "not_connected"), 0u) << line.dump();
  EXPECT_EQ(u64(line, "pushed"), 60u) << line.dump();
  pid_t daemon_pid = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        auto status = query_status(session_socket_path(runtime_dir_, name));
        if (!status || status->value("producers", json::array()).empty()) return false;
        daemon_pid = static_cast<pid_t>(status->value("pid", 0LL));
        return true;
      },
      kStartTimeout))
      << "the producer never registered with the daemon it started";
  detached_.push_back(daemon_pid);
  release_producer(p);
  ASSERT_TRUE(wait_until([&] { return !process_alive(daemon_pid); }, kExitTimeout));
  auto files = read_index(output + "/" + name);
  ASSERT_TRUE(files) << files.message();
  std::map<std::string, int64_t> frames;
  for (const auto& f : *files) frames[f.value("stream", "")] += f.value("frames", int64_t{0});
  EXPECT_EQ(frames["r0.s0"], 30);  // every push, those made before the daemon was up too
  EXPECT_EQ(frames["r0.s1"], 30);
}

TEST_F(ClientStartTest, AutostartWithABadDaemonPathIsAStateAndTheTrainingRuns) {
  const std::string name = session("nodaemon");
  ChildProcess* p =
      start_producer(name, runtime_dir_, 0,
                     {"--count", "50", "--wait-connect-ms", "0", "--connect-timeout-ms", "20000", "--autostart",
                      "--daemon", tmp_.path() + "/missing/tensorscoped", "--autostart-output", tmp_.path() + "/runs"});
  ASSERT_NE(p, nullptr);
  const json line = final_line(p);
  ASSERT_TRUE(line.is_object());
  EXPECT_EQ(u64(line, "not_connected"), 50u);
  EXPECT_THAT(line.value("autostart", ""), HasSubstr("is not an executable file; not retried"));
  release_producer(p);
}

// kill -9 of a producer and its daemon together leaves the producer's segment; the next
// daemon to start removes it, and so does the next client; a live producer's segment
// survives both.
TEST_F(ClientStartTest, LeftoverSegmentsOfKilledProcessesAreRemovedLiveOnesKept) {
  const std::string name = session("left");
  auto kill_both = [&](DaemonProcess* daemon, ChildProcess* producer) {
    // Stopped first, so neither sees the other go and cleans up in time.
    ::kill(-producer->pid(), SIGSTOP);
    ::kill(-daemon->process().pid(), SIGSTOP);
    producer->kill_group();
    daemon->process().kill_group();
  };
  auto connected_producer = [&](const std::string& s, int rank) {
    ChildProcess* p = start_producer(s, runtime_dir_, rank,
                                     {"--count", "0", "--stdin-control", "--sleep-us", "5000", "--report-ms", "20",
                                      "--budget", std::to_string(8 * kMiB), "--wait-connect-ms", "20000"});
    EXPECT_TRUE(wait_json_line(
                    *p, [](const json& j) { return u64(j, "pushed") > 0; }, kStartTimeout)
                    .is_object());
    return p;
  };
  DaemonProcess* first = start_ready_daemon(name, runtime_dir_);
  ASSERT_NE(first, nullptr);
  ChildProcess* victim = connected_producer(name, 0);
  ASSERT_EQ(segment_files(runtime_dir_).size(), 1u);
  kill_both(first, victim);
  ASSERT_EQ(segment_files(runtime_dir_).size(), 1u) << "the kill should leave the segment behind";

  // A live producer of another session, with its daemon.
  const std::string other = session("live");
  ASSERT_NE(start_ready_daemon(other, runtime_dir_), nullptr);
  ChildProcess* live = connected_producer(other, 1);
  const std::vector<std::string> live_segment =
      list_dir(runtime_dir_, [&](const std::string& n) { return segment_file_pid(n) == live->pid(); });
  ASSERT_EQ(live_segment.size(), 1u);

  DaemonProcess* second = start_ready_daemon(name, runtime_dir_);  // a daemon start cleans up
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(segment_files(runtime_dir_), live_segment) << "only the live producer's segment remains";

  ChildProcess* victim2 = connected_producer(name, 2);
  kill_both(second, victim2);
  ASSERT_EQ(segment_files(runtime_dir_).size(), 2u);
  // A client start (no daemon for its session) cleans up too.
  ChildProcess* newcomer = start_producer(session("new"), runtime_dir_, 3, {"--count", "1", "--wait-connect-ms", "0"});
  ASSERT_NE(newcomer, nullptr);
  ASSERT_TRUE(final_line(newcomer).is_object());
  release_producer(newcomer);  // its connection thread has run by then
  EXPECT_EQ(segment_files(runtime_dir_), live_segment);
  // The live producer never noticed any of it.
  const json still = wait_json_line(
      *live, [](const json& j) { return u64(j, "pushed") > 100; }, kStartTimeout);
  ASSERT_TRUE(still.is_object());
  EXPECT_EQ(u64(still, "connections"), 1u);
  release_producer(live);
}

// A second daemon for a session exits with status 3 and says why; hostile strings in a
// registration reach the log escaped and cut.
TEST_F(ClientStartTest, SecondDaemonRefusedAndHostileRegistrationsLoggedSafely) {
  const std::string name = session("twin");
  DaemonProcess* daemon = start_ready_daemon(name, runtime_dir_);
  ASSERT_NE(daemon, nullptr);
  DaemonProcess* twin = start_daemon(name, runtime_dir_);
  ASSERT_NE(twin, nullptr);
  auto exit = twin->process().wait_exit(kStartTimeout);
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->exited && exit->code == 3) << exit->describe();
  EXPECT_THAT(twin->log(), HasSubstr("already running"));

  const std::string hostile = "\x1b[2J\x1b]0;pwned\x07\nforged line " + std::string(70000, 'B');
  auto reply =
      request_reply(daemon->socket_path(), {{"type", "register"}, {"abi", 2}, {"session", hostile}, {"segment", "x"}});
  ASSERT_TRUE(reply) << reply.message();
  EXPECT_EQ(reply->value("type", ""), "error");
  ASSERT_TRUE(daemon->wait_status([](const json& s) { return s.value("registrations_refused", 0) >= 1; }, 10s));
  const std::string log = daemon->log();
  EXPECT_THAT(log, HasSubstr("refused a registration"));
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_EQ(log.find('\x07'), std::string::npos);
  EXPECT_EQ(log.find("\nforged line"), std::string::npos);
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) EXPECT_LT(line.size(), 5000u);
}

}  // namespace
}  // namespace tensorscope::itest
