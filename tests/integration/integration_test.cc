// integration_test.cc — end-to-end tests of tensorscoped with real processes.
//
// Each test starts its own daemon(s) in a private temporary directory (runtime dir,
// session, output), runs test_producer processes against them, and checks what a user
// would check: every record accounted for, every listed video playing with its listed
// frame count, crash recovery, clean shutdown. Waits poll with deadlines; the fixture
// kills every process it started (whole process groups) in TearDown, even after a
// failed assertion.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/wire_format.h"
#include "process_fixture.h"
#include "small_tmpfs.h"
#include "temp_dir.h"

namespace tensorscope::itest {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr Millis kStartTimeout = 30s;      // daemon answers status
constexpr Millis kProducerTimeout = 240s;  // a producer finishes its pushes
constexpr Millis kSettleTimeout = 90s;     // the daemon catches up / drains
constexpr Millis kExitTimeout = 60s;       // a process exits after being told to
constexpr Millis kProgressTimeout = 30s;   // records keep flowing through a live daemon

bool is_temp_video(const std::string& name) { return name.rfind(".tmp-", 0) == 0; }
bool is_final_video(const std::string& name) {
  return !is_temp_video(name) && name.size() > 4 && name.compare(name.size() - 4, 4, ".mp4") == 0;
}

std::string stream_key(const std::string& stream, int rank) {
  return stream + "@rank" + std::to_string(rank);
}

uint64_t u64(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].get<uint64_t>();
}

// The status entry of the producer with this pid, or null.
json producer_entry(const json& status, pid_t pid) {
  for (const auto& p : status.value("producers", json::array())) {
    if (p.value("pid", 0LL) == static_cast<long long>(pid)) return p;
  }
  return nullptr;
}

// "frames per (stream, rank)" from index entries.
std::map<std::string, int64_t> frames_by_stream(const std::vector<json>& files) {
  std::map<std::string, int64_t> out;
  for (const auto& f : files) {
    out[stream_key(f.value("stream", ""), f.value("rank", -1))] += f.value("frames", int64_t{0});
  }
  return out;
}

// Expected frames per (stream, rank) from a producer's final line.
void add_expected(const json& final_line, int rank, std::map<std::string, int64_t>* out) {
  const json per_stream = final_line.value("per_stream", json::object());
  for (const auto& [name, n] : per_stream.items()) {
    (*out)[stream_key(name, rank)] += n.get<int64_t>();
  }
}

// Every push call falls in exactly one bucket.
void expect_accounted(const json& line, const std::string& who) {
  SCOPED_TRACE(who + ": " + line.dump());
  EXPECT_EQ(u64(line, "calls"), u64(line, "pushed") + u64(line, "dropped_full") + u64(line, "refused") +
                                    u64(line, "not_connected") + u64(line, "gated"));
  EXPECT_EQ(u64(line, "refused"), u64(line, "expected_refusals"));
  uint64_t per_stream_total = 0;
  const json per_stream = line.value("per_stream", json::object());
  for (const auto& [name, n] : per_stream.items()) {
    per_stream_total += n.get<uint64_t>();
  }
  EXPECT_EQ(per_stream_total, u64(line, "pushed"));
}

class IntegrationTest : public ProcessFixture {
 protected:
  IntegrationTest() : ProcessFixture("ts-itest") {}

  std::string output_dir(const std::string& tag) const { return tmp_.path() + "/out-" + tag; }

  // Small frames and short timings make the tests fast.
  std::string write_config(int max_frames, int shutdown_timeout_ms = 45000, int width = 160,
                           int height = 120, const std::string& extra_yaml = "") {
    const std::string path = tmp_.path() + "/config-" + std::to_string(configs_++) + ".yaml";
    std::ofstream out(path);
    out << "log_level: info\n"
        << "video:\n  width: " << width << "\n  height: " << height << "\n  fps: 10\n  max_frames: "
        << max_frames << "\n"
        << "supervisor:\n  heartbeat_interval_ms: 100\n  heartbeat_timeout_ms: 10000\n"
        << "  restart_backoff_initial_ms: 100\n  restart_backoff_max_ms: 1000\n"
        << "  shutdown_timeout_ms: " << shutdown_timeout_ms << "\n"
        << extra_yaml;
    return path;
  }

  DaemonProcess* start_daemon(const std::string& session_name, const std::string& output, int workers,
                              const std::string& config) {
    return ProcessFixture::start_daemon({"", config, runtime_dir_, session_name, output, workers, ""});
  }

  DaemonProcess* start_ready_daemon(const std::string& session_name, const std::string& output,
                                    int workers, const std::string& config) {
    return ProcessFixture::start_ready_daemon({"", config, runtime_dir_, session_name, output, workers, ""},
                                              kStartTimeout);
  }

  ChildProcess* start_producer(const std::string& session_name, int rank,
                               const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--session", session_name, "--runtime-dir", runtime_dir_,
                                     "--rank", std::to_string(rank), "--seed", std::to_string(1000 + rank),
                                     "--wait-connect-ms", "30000"};
    args.insert(args.end(), extra.begin(), extra.end());
    return ProcessFixture::start_producer(args);
  }

  // Waits for the producer's final JSON line.
  static json final_line(ChildProcess* p, Millis timeout = kProducerTimeout) {
    return ProcessFixture::final_line(p, timeout);
  }

  // A progress (or final) line for which `predicate` holds.
  static json progress_line(ChildProcess* p, const std::function<bool(const json&)>& predicate,
                            Millis timeout) {
    return wait_json_line(*p, predicate, timeout);
  }

  // SIGTERM and a clean exit within the deadline; returns the seconds it took.
  static double terminate_daemon(DaemonProcess* d, Millis timeout = kExitTimeout) {
    const auto t0 = Clock::now();
    EXPECT_TRUE(d->process().send_signal(SIGTERM));
    auto exit = d->process().wait_exit(timeout);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_TRUE(exit.has_value()) << "tensorscoped did not exit within " << timeout.count()
                                  << " ms of SIGTERM";
    if (exit) {
      EXPECT_TRUE(exit->exited && exit->code == 0) << "tensorscoped: " << exit->describe();
    }
    return seconds;
  }

  // Every file listed plays with exactly its listed frame count; no temporary files are
  // left; optionally every final video on disk is listed.
  static void verify_session_dir(const std::string& session_dir, const std::vector<json>& files,
                                 bool every_video_listed) {
    std::set<std::string> listed;
    for (const auto& f : files) {
      const std::string path = f.value("path", "");
      SCOPED_TRACE("index entry " + f.dump());
      listed.insert(path);
      EXPECT_FALSE(path.empty());
      EXPECT_GT(f.value("frames", int64_t{0}), 0);
      EXPECT_LE(f.value("first_step", int64_t{0}), f.value("last_step", int64_t{0}));
      const std::string full = session_dir + "/" + path;
      struct stat st {};
      ASSERT_EQ(::stat(full.c_str(), &st), 0) << full << " is listed but missing";
      EXPECT_GT(st.st_size, 0);
      EXPECT_EQ(count_decodable_frames(full), f.value("frames", int64_t{-2})) << full;
    }
    EXPECT_THAT(list_dir(session_dir, is_temp_video), ::testing::IsEmpty())
        << "temporary video files left in " << session_dir;
    EXPECT_THAT(list_dir(session_dir, [](const std::string& n) { return n.rfind("index.json.", 0) == 0; }),
                ::testing::IsEmpty());
    if (every_video_listed) {
      for (const auto& name : list_dir(session_dir, is_final_video)) {
        EXPECT_TRUE(listed.count(name)) << name << " is a finished video missing from index.json";
      }
    }
  }

  static std::vector<json> index_or_fail(const std::string& session_dir) {
    auto files = read_index(session_dir);
    EXPECT_TRUE(files.is_ok()) << files.message();
    return files.is_ok() ? *files : std::vector<json>{};
  }

  CommandResult run_cli(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {TENSORSCOPE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, logs_, 30s);
  }

  int configs_ = 0;
};

// 1. Four producers x 500 pushes of varied shapes and dtypes, two workers, rotating
// files: every record is accounted for, every received record becomes one frame.
TEST_F(IntegrationTest, FourProducersEveryRecordBecomesOneFrame) {
  const auto t0 = Clock::now();
  const std::string name = session("acct");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("acct"), 2, write_config(20));
  ASSERT_NE(daemon, nullptr);

  constexpr int kProducers = 4;
  std::vector<ChildProcess*> producers;
  for (int rank = 0; rank < kProducers; ++rank) {
    std::vector<std::string> args = {"--count", "500", "--streams", std::to_string(3 + rank),
                                     "--stdin-control"};
    if (rank == 2) args.push_back("--bad-inputs");
    producers.push_back(start_producer(name, rank, args));
    ASSERT_NE(producers.back(), nullptr);
  }

  std::vector<json> finals;
  std::map<std::string, int64_t> expected;
  for (int rank = 0; rank < kProducers; ++rank) {
    json f = final_line(producers[rank]);
    ASSERT_TRUE(f.is_object()) << "producer rank " << rank << " printed no final line";
    expect_accounted(f, "rank " + std::to_string(rank));
    EXPECT_EQ(u64(f, "calls"), rank == 2 ? 502u : 500u);
    EXPECT_EQ(u64(f, "expected_refusals"), rank == 2 ? 2u : 0u);
    EXPECT_EQ(u64(f, "connections"), 1u);
    EXPECT_EQ(u64(f, "not_connected"), 0u);
    EXPECT_GT(u64(f, "pushed"), 0u);
    add_expected(f, rank, &expected);
    finals.push_back(f);
  }

  // While the producers are still connected, the daemon catches up: received == pushed.
  json last;
  const bool caught_up = daemon->wait_status([&](const json& s) {
    for (int rank = 0; rank < kProducers; ++rank) {
      const json p = producer_entry(s, producers[rank]->pid());
      if (p.is_null()) return false;
      if (u64(p, "received") + u64(p, "dropped_invalid") < u64(finals[rank], "pushed")) return false;
    }
    return true;
  }, kSettleTimeout, &last);
  EXPECT_TRUE(caught_up) << "the daemon never received every pushed record:\n" << last.dump(2);
  for (int rank = 0; rank < kProducers; ++rank) {
    const json p = producer_entry(last, producers[rank]->pid());
    SCOPED_TRACE("producer rank " + std::to_string(rank) + " in status: " + p.dump());
    ASSERT_TRUE(p.is_object());
    EXPECT_EQ(p.value("rank", -1), rank);
    EXPECT_EQ(u64(p, "pushed"), u64(finals[rank], "pushed"));
    EXPECT_EQ(u64(p, "received"), u64(p, "pushed"));
    EXPECT_EQ(u64(p, "dropped_invalid"), 0u);
    EXPECT_EQ(u64(p, "dropped_full"), u64(finals[rank], "dropped_full"));
    EXPECT_EQ(u64(p, "refused"), u64(finals[rank], "refused"));
  }
  // Both workers got producers (the supervisor balances them).
  std::set<int> used_workers;
  for (const auto& p : last.value("producers", json::array())) used_workers.insert(p.value("worker", -1));
  EXPECT_EQ(used_workers, (std::set<int>{0, 1}));

  for (auto* p : producers) release_producer(p);

  // Disconnected producers are drained and their files finalized.
  EXPECT_TRUE(daemon->wait_status([](const json& s) {
    return s.value("producers", json::array()).empty();
  }, kSettleTimeout, &last)) << "producers still listed:\n" << last.dump(2);
  for (const auto& w : last.value("workers", json::array())) {
    const json stats = w.value("stats", json::object());
    EXPECT_TRUE(w.value("alive", false)) << w.dump();
    EXPECT_EQ(u64(w, "restarts"), 0u) << w.dump();
    EXPECT_EQ(u64(stats, "invalid"), 0u) << w.dump();
    EXPECT_EQ(u64(stats, "render_errors"), 0u) << w.dump();
  }
  EXPECT_EQ(frames_by_stream(index_or_fail(daemon->session_dir())), expected)
      << "index.json after the producers disconnected (before SIGTERM)";

  const double stop_seconds = terminate_daemon(daemon);
  const auto files = index_or_fail(daemon->session_dir());
  EXPECT_EQ(frames_by_stream(files), expected);
  // Small max_frames: every stream rotated through several files.
  EXPECT_GT(files.size(), expected.size());
  for (const auto& f : files) EXPECT_LE(f.value("frames", 0), 20) << f.dump();
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
  std::fprintf(stderr, "[ timing ] %zu files, %zu streams; SIGTERM->exit %.2f s; test %.1f s\n",
               files.size(), expected.size(), stop_seconds,
               std::chrono::duration<double>(Clock::now() - t0).count());
}

// 1b. Eight training processes that all say rank 0 (no RANK set) push the same stream
// names through one worker: each process gets its own files (named after its pid),
// every file plays with its listed frames, and every pushed record is a frame.
TEST_F(IntegrationTest, EightProducersOfOneRankNeverShareAFile) {
  const std::string name = session("rank0");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("rank0"), 1, write_config(25));
  ASSERT_NE(daemon, nullptr);
  constexpr int kProducers = 8;
  std::vector<ChildProcess*> producers;
  for (int i = 0; i < kProducers; ++i) {
    producers.push_back(start_producer(name, 0, {"--count", "120", "--streams", "3", "--stdin-control"}));
    ASSERT_NE(producers.back(), nullptr);
  }
  std::map<int64_t, int64_t> expected;  // pid -> frames
  for (ChildProcess* p : producers) {
    json f = final_line(p);
    ASSERT_TRUE(f.is_object()) << "producer " << p->pid() << " printed no final line";
    expect_accounted(f, "producer " + std::to_string(p->pid()));
    EXPECT_EQ(u64(f, "dropped_full"), 0u);
    expected[p->pid()] = static_cast<int64_t>(u64(f, "pushed"));
  }
  for (ChildProcess* p : producers) release_producer(p);
  json last;
  EXPECT_TRUE(daemon->wait_status([](const json& s) { return s.value("producers", json::array()).empty(); },
                                  kSettleTimeout, &last))
      << "producers still listed:\n" << last.dump(2);
  terminate_daemon(daemon);
  const auto files = index_or_fail(daemon->session_dir());
  std::map<int64_t, int64_t> frames;
  for (const auto& f : files) {
    const int64_t pid = f.value("pid", int64_t{0});
    frames[pid] += f.value("frames", int64_t{0});
    EXPECT_THAT(f.value("path", ""), HasSubstr("__rank0__pid" + std::to_string(pid) + "__")) << f.dump();
  }
  EXPECT_EQ(frames, expected);
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
  EXPECT_THAT(daemon->log(), ::testing::Not(HasSubstr("cannot finalize")));
}

// Descriptors a process has open (-1 when it is gone).
int open_descriptors(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return ec ? -1 : n;
}

// 1c. A thousand streams through one worker that may keep 16 videos open: every stream
// gets every frame, in whole files (not a file per frame), while the worker's open
// descriptors stay bounded; the stream limit's drops reach the producer's stats.
TEST_F(IntegrationTest, AThousandStreamsOnOneWorkerKeepEveryFrame) {
  const std::string name = session("many");
  DaemonProcess* daemon = start_ready_daemon(
      name, output_dir("many"), 1,
      write_config(1000, 45000, 160, 120, "limits:\n  max_open_videos_per_worker: 16\n"));
  ASSERT_NE(daemon, nullptr);
  auto status = daemon->status();
  ASSERT_TRUE(status.is_ok()) << status.message();
  const pid_t worker = static_cast<pid_t>((*status)["workers"][0].value("pid", -1));
  const int idle_fds = open_descriptors(worker);
  ASSERT_GT(idle_fds, 0);

  constexpr int kStreams = 1000, kRounds = 3;
  ChildProcess* producer = start_producer(
      name, 0, {"--count", std::to_string(kStreams * kRounds), "--streams", std::to_string(kStreams),
                "--max-elements", "64", "--sleep-us", "3000", "--stdin-control",
                // Every record fits in the ring: on a loaded machine the worker may fall
                // behind the producer, and what this test counts is frames, not drops.
                "--ring-slots", "4096"});
  ASSERT_NE(producer, nullptr);
  int most_fds = idle_fds;
  json f;
  while (!(f = progress_line(producer, [](const json& l) { return l.value("final", false); }, 200ms)).is_object()) {
    most_fds = std::max(most_fds, open_descriptors(worker));
    ASSERT_TRUE(producer->running()) << "the producer exited without a final line";
  }
  expect_accounted(f, "producer");
  EXPECT_EQ(u64(f, "dropped_full"), 0u);
  EXPECT_EQ(u64(f, "pushed"), static_cast<uint64_t>(kStreams * kRounds));
  json last;
  EXPECT_TRUE(daemon->wait_status([&](const json& s) {
    const json p = producer_entry(s, producer->pid());
    most_fds = std::max(most_fds, open_descriptors(worker));
    return p.is_object() && u64(p, "received") == u64(f, "pushed");
  }, kSettleTimeout, &last)) << last.dump(2);
  release_producer(producer);
  EXPECT_TRUE(daemon->wait_status([](const json& s) { return s.value("producers", json::array()).empty(); },
                                  kSettleTimeout, &last));
  terminate_daemon(daemon);
  // 16 videos and their journals, the producer's segment, and a few of libraries.
  EXPECT_LE(most_fds, idle_fds + 2 * 16 + 8) << "idle " << idle_fds;
  const auto files = index_or_fail(daemon->session_dir());
  std::map<std::string, int64_t> expected;
  add_expected(f, 0, &expected);
  EXPECT_EQ(expected.size(), static_cast<size_t>(kStreams));
  EXPECT_EQ(frames_by_stream(files), expected);
  // One file per stream and render mode (the random shapes pick the mode): suspending a
  // video never splits it.
  std::map<std::string, int> files_per_video;
  for (const auto& e : files) ++files_per_video[e.value("stream", "") + "/" + e.value("mode", "")];
  for (const auto& [video, n] : files_per_video) EXPECT_EQ(n, 1) << video;
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
}

// 1d. Past limits.max_streams_per_worker, records of further streams are not drawn and
// the producer's stats() says how many.
TEST_F(IntegrationTest, TheStreamLimitsDropsReachTheProducer) {
  const std::string name = session("limit");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("limit"), 1,
                                             write_config(1000, 45000, 160, 120, "limits:\n  max_streams_per_worker: 5\n"));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer =
      start_producer(name, 0, {"--count", "80", "--streams", "8", "--max-elements", "64", "--stdin-control"});
  ASSERT_NE(producer, nullptr);
  json f = final_line(producer);
  ASSERT_TRUE(f.is_object());
  json last;
  EXPECT_TRUE(daemon->wait_status([&](const json& s) {
    const json p = producer_entry(s, producer->pid());
    return p.is_object() && u64(p, "received") == u64(f, "pushed") && u64(p, "dropped_by_daemon") > 0;
  }, kSettleTimeout, &last)) << last.dump(2);
  const json p = producer_entry(last, producer->pid());
  EXPECT_GT(u64(p, "dropped_by_daemon"), 0u);
  EXPECT_LT(u64(p, "dropped_by_daemon"), u64(p, "received"));
  release_producer(producer);
  terminate_daemon(daemon);
}

// 2. kill -9 a worker mid-run: the supervisor restarts it, finished files survive, and
// the producer's later records become new files.
TEST_F(IntegrationTest, KilledWorkerIsRestartedAndFinishedFilesSurvive) {
  const std::string name = session("wkill");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("wkill"), 1, write_config(10));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer = start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "3000", "--streams", "2"});
  ASSERT_NE(producer, nullptr);

  std::vector<json> before;
  ASSERT_TRUE(wait_until([&] {
    auto files = read_index(daemon->session_dir());
    if (files.is_ok()) before = *files;
    return !before.empty();
  }, kSettleTimeout)) << "no finished file appeared in index.json";

  auto status = daemon->status();
  ASSERT_TRUE(status.is_ok()) << status.message();
  ASSERT_EQ((*status)["workers"].size(), 1u);
  const json worker = (*status)["workers"][0];
  ASSERT_TRUE(worker.value("alive", false));
  const pid_t old_pid = static_cast<pid_t>(worker.value("pid", -1));
  ASSERT_GT(old_pid, 0);
  ASSERT_EQ(::kill(old_pid, SIGKILL), 0);

  json last;
  EXPECT_TRUE(daemon->wait_status([&](const json& s) {
    const json w = s["workers"][0];
    return u64(w, "restarts") == 1 && w.value("alive", false) && w.value("pid", -1) > 0 &&
           w.value("pid", -1) != old_pid;
  }, 30s, &last)) << "the worker was not restarted:\n" << last.dump(2);

  // The restarted worker picks the producer up again: records keep arriving.
  const uint64_t received_at_restart = u64(producer_entry(last, producer->pid()), "received");
  ASSERT_TRUE(daemon->wait_status([&](const json& s) {
    return u64(producer_entry(s, producer->pid()), "received") > received_at_restart;
  }, kProgressTimeout, &last)) << "the restarted worker does not read the producer's ring "
                               << "(received stays at " << received_at_restart << "):\n" << last.dump(2);

  // Everything finished so far came from the old worker; files finished from now on
  // hold later steps and come from the new one.
  int64_t last_step_at_restart = -1;
  for (const auto& f : index_or_fail(daemon->session_dir())) {
    last_step_at_restart = std::max(last_step_at_restart, f.value("last_step", int64_t{-1}));
  }
  std::vector<json> later;
  EXPECT_TRUE(wait_until([&] {
    later.clear();
    auto files = read_index(daemon->session_dir());
    if (files.is_ok()) {
      for (const auto& f : *files) {
        if (f.value("first_step", int64_t{-1}) > last_step_at_restart) later.push_back(f);
      }
    }
    return !later.empty();
  }, kSettleTimeout)) << "no file finished after the restart (last step before: " << last_step_at_restart << ")";

  // The producer never noticed.
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  const json f = final_line(producer);
  ASSERT_TRUE(f.is_object());
  expect_accounted(f, "producer");
  EXPECT_EQ(u64(f, "connections"), 1u);
  release_producer(producer);

  terminate_daemon(daemon);
  const auto files = index_or_fail(daemon->session_dir());
  // Files finished before the kill are still listed, unchanged, and play.
  for (const auto& b : before) {
    const auto it = std::find_if(files.begin(), files.end(),
                                 [&](const json& x) { return x.value("path", "") == b.value("path", ""); });
    ASSERT_NE(it, files.end()) << b.dump() << " vanished from index.json";
    EXPECT_EQ(*it, b);
  }
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/false);
  const auto later_it = std::find_if(files.begin(), files.end(), [&](const json& x) {
    return x.value("first_step", int64_t{-1}) > last_step_at_restart;
  });
  EXPECT_NE(later_it, files.end());
  EXPECT_THAT(daemon->log(), HasSubstr("killed by signal 9"));
}

// 2b. kill -9 a worker whose videos are open (none finished yet): its files are cut at
// their last whole frame, renamed and listed with their real frame counts; the
// restarted worker goes on in new segments; at most about a second of frames is lost.
TEST_F(IntegrationTest, KilledWorkersOpenVideosAreKeptUpToTheirLastFrame) {
  const std::string name = session("cut");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("cut"), 1, write_config(100000));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer = start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "4000", "--streams", "2", "--report-ms", "100"});
  ASSERT_NE(producer, nullptr);
  json last;
  ASSERT_TRUE(daemon->wait_status([&](const json& s) {
    return u64(producer_entry(s, producer->pid()), "received") >= 200;
  }, kSettleTimeout, &last)) << last.dump(2);
  EXPECT_TRUE(index_or_fail(daemon->session_dir()).empty()) << "nothing is finished before the kill";
  const pid_t old_pid = static_cast<pid_t>(last["workers"][0].value("pid", -1));
  ASSERT_EQ(::kill(old_pid, SIGKILL), 0);
  const auto killed_at = Clock::now();
  // The cut files are listed once the supervisor has seen the worker die.
  std::vector<json> cut;
  EXPECT_TRUE(wait_until([&] {
    auto files = read_index(daemon->session_dir());
    if (files.is_ok()) cut = *files;
    return cut.size() >= 2;
  }, kSettleTimeout)) << "the killed worker's videos were not listed";
  std::fprintf(stderr, "[ timing ] cut files listed %.2f s after kill -9\n",
               std::chrono::duration<double>(Clock::now() - killed_at).count());
  const uint64_t received_at_kill = u64(producer_entry(last, producer->pid()), "received");
  ASSERT_TRUE(daemon->wait_status([&](const json& s) {
    return s["workers"][0].value("alive", false) && u64(s["workers"][0], "restarts") == 1 &&
           u64(producer_entry(s, producer->pid()), "received") > received_at_kill + 50;
  }, kProgressTimeout, &last)) << last.dump(2);
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  const json f = final_line(producer);
  ASSERT_TRUE(f.is_object());
  release_producer(producer);
  EXPECT_TRUE(daemon->wait_status([](const json& s) { return s.value("producers", json::array()).empty(); },
                                  kSettleTimeout, &last));
  terminate_daemon(daemon);
  const auto files = index_or_fail(daemon->session_dir());
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
  std::map<std::string, int64_t> pushed;
  add_expected(f, 0, &pushed);
  const std::map<std::string, int64_t> listed = frames_by_stream(files);
  for (const auto& [stream, n] : pushed) {
    const int64_t kept = listed.count(stream) ? listed.at(stream) : 0;
    SCOPED_TRACE(stream);
    EXPECT_LE(kept, n);
    // The pushes of about a second (one every 4 ms over 2 streams: ~125 per stream).
    EXPECT_GE(kept, n - 125) << "lost " << n - kept << " of " << n << " frames";
    std::fprintf(stderr, "[ figure ] %s: %lld of %lld frames kept across kill -9 of the worker\n", stream.c_str(),
                 static_cast<long long>(kept), static_cast<long long>(n));
  }
  // Per stream and mode: the cut file, then the restarted worker's segment after it.
  for (const json& c : cut) {
    const auto later = std::find_if(files.begin(), files.end(), [&](const json& x) {
      return x.value("stream", "") == c.value("stream", "") && x.value("first_step", int64_t{-1}) > c.value("last_step", int64_t{0});
    });
    EXPECT_NE(later, files.end()) << "no segment after " << c.dump();
  }
  EXPECT_THAT(daemon->log(), HasSubstr("recovered "));
}

// 3a. kill -9 the supervisor: whatever its workers finish afterwards is not in its
// index.json; a daemon started again on the session lists every video on disk, each
// with its real frame count and steps.
TEST_F(IntegrationTest, ARestartedDaemonListsWhatAKilledOneLeft) {
  const std::string name = session("relist");
  const std::string config = write_config(30);
  DaemonProcess* first = start_ready_daemon(name, output_dir("relist"), 1, config);
  ASSERT_NE(first, nullptr);
  ChildProcess* producer = start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "2000", "--streams", "3", "--report-ms", "50"});
  ASSERT_NE(producer, nullptr);
  json last;
  ASSERT_TRUE(first->wait_status([&](const json& s) {
    return u64(producer_entry(s, producer->pid()), "received") >= 150;
  }, kProgressTimeout, &last)) << last.dump(2);
  const pid_t worker = static_cast<pid_t>(last["workers"][0].value("pid", -1));
  ASSERT_TRUE(first->process().send_signal(SIGKILL));
  ASSERT_TRUE(first->process().wait_exit(kExitTimeout).has_value());
  ASSERT_TRUE(wait_until([&] { return ::kill(worker, 0) != 0; }, kExitTimeout)) << "the worker outlived its supervisor";
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  ASSERT_TRUE(final_line(producer).is_object());
  release_producer(producer);
  const std::string session_dir = first->session_dir();
  const size_t listed_by_first = index_or_fail(session_dir).size();

  DaemonProcess* second = start_ready_daemon(name, output_dir("relist"), 1, config);
  ASSERT_NE(second, nullptr);
  const auto files = index_or_fail(session_dir);
  EXPECT_GT(files.size(), listed_by_first);
  verify_session_dir(session_dir, files, /*every_video_listed=*/true);
  for (const auto& f : files) EXPECT_EQ(f.value("rank", -1), 0) << f.dump();
  terminate_daemon(second);
}

// 3b. The output fills up: videos are never published broken, the daemon says "output
// full" (in status, and in a log that does not flood), counts the frames it could not
// write, and goes on by itself once there is room again; every listed video plays.
TEST_F(IntegrationTest, AFullDiskIsReportedAndOutlived) {
  testing::SmallTmpfs disk(std::to_string(6 << 20));
  if (!disk.mounted()) GTEST_SKIP() << disk.why();
  const std::string out = disk.path();
  const std::string name = session("full");
  DaemonProcess* daemon = start_ready_daemon(name, out, 1, write_config(40, 45000, 320, 240));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer = start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "3000", "--streams", "4", "--report-ms", "100"});
  ASSERT_NE(producer, nullptr);
  json last;
  ASSERT_TRUE(daemon->wait_status([&](const json& s) { return s.value("files", 0) >= 2; }, kSettleTimeout, &last))
      << last.dump(2);
  // Fill what is left.
  const std::string filler = out + "/filler";
  {
    std::ofstream f(filler, std::ios::binary);
    const std::string block(64 << 10, 'x');
    while (f.write(block.data(), static_cast<std::streamsize>(block.size())) && f.flush()) {
    }
  }
  ASSERT_TRUE(daemon->wait_status([&](const json& s) {
    return s["output"].value("state", "") == "full" && s["output"].value("not_written", 0) > 20;
  }, kSettleTimeout, &last)) << "the daemon did not say the output is full:\n" << last.dump(2);
  const CommandResult text = run_cli({"status", "--session", name, "--runtime-dir", runtime_dir_});
  EXPECT_THAT(text.out, HasSubstr("OUTPUT FULL")) << text.out << text.err;
  std::this_thread::sleep_for(3s);  // full for a while: the log must not flood
  ::unlink(filler.c_str());
  ASSERT_TRUE(daemon->wait_status([&](const json& s) { return s["output"].value("state", "") == "ok"; },
                                  kSettleTimeout, &last)) << "the daemon did not recover:\n" << last.dump(2);
  const uint64_t files_before = last.value("files", 0);
  EXPECT_TRUE(daemon->wait_status([&](const json& s) { return s.value("files", 0ULL) > files_before; },
                                  kSettleTimeout, &last)) << "no video finished after the space came back";
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  ASSERT_TRUE(final_line(producer).is_object());
  release_producer(producer);
  terminate_daemon(daemon);
  const std::string log = daemon->log();
  size_t lines = 0;
  for (size_t at = log.find("output"); at != std::string::npos; at = log.find("output", at + 1)) ++lines;
  EXPECT_LE(lines, 12u) << "the log floods:\n" << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  if (std::getenv("TS_SHOW_LOG")) std::fprintf(stderr, "%s\n", log.c_str());
  EXPECT_THAT(log, HasSubstr("output full"));
  EXPECT_THAT(log, HasSubstr("output writable again"));
  const auto files = index_or_fail(daemon->session_dir());
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
}

// 3c. The session directory is deleted while videos are written: the daemon makes it
// again, index.json keeps only the files still there, and later videos are listed.
TEST_F(IntegrationTest, ADeletedOutputDirectoryIsMadeAgain) {
  const std::string name = session("gone");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("gone"), 1, write_config(20));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer = start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "3000", "--streams", "2", "--report-ms", "100"});
  ASSERT_NE(producer, nullptr);
  json last;
  ASSERT_TRUE(daemon->wait_status([&](const json& s) { return s.value("files", 0) >= 2; }, kSettleTimeout, &last));
  // As `rm -rf` by a user: the daemon may add a file while the tree is removed, so retry.
  std::error_code ec;
  for (int tries = 0; tries < 100 && std::filesystem::exists(daemon->session_dir()); ++tries) {
    std::filesystem::remove_all(daemon->session_dir(), ec);
  }
  ASSERT_TRUE(wait_until([&] {
    auto files = read_index(daemon->session_dir());
    return files.is_ok() && !files->empty();
  }, kSettleTimeout)) << "no index.json with new files after the directory was deleted";
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  ASSERT_TRUE(final_line(producer).is_object());
  release_producer(producer);
  terminate_daemon(daemon);
  const auto files = index_or_fail(daemon->session_dir());
  EXPECT_FALSE(files.empty());
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
  EXPECT_THAT(daemon->log(), HasSubstr("was deleted; made it again"));
}

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
                                  kSettleTimeout, &last)) << last.dump(2);
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
        name, rank, {"--count", "2500", "--streams", "2500", "--max-elements", "4", "--stdin-control"}));
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
    EXPECT_LT(seconds, 2.0) << "status took " << seconds << " s with six silent clients";
  }
  std::this_thread::sleep_for(2s);  // past the heartbeat timeout
  ASSERT_TRUE(daemon->wait_status([](const json&) { return true; }, 5s, &last));
  for (const auto& w : last["workers"]) EXPECT_EQ(u64(w, "restarts"), 0u) << w.dump();
  for (int fd : silent) ::close(fd);
  for (ChildProcess* p : producers) release_producer(p);
  terminate_daemon(daemon, 120s);
  EXPECT_THAT(daemon->log(), ::testing::Not(HasSubstr("missed its heartbeat")));
}

// 6. A producer's segment file truncated while a worker reads it (by the producer or
// anyone with its uid): the worker does not die of SIGBUS; the producer is dropped and
// its client registers a fresh segment and goes on.
TEST_F(IntegrationTest, ATruncatedSegmentDoesNotKillTheWorker) {
  const std::string name = session("trunc");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("trunc"), 1, write_config(20));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer = start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "2000", "--streams", "2", "--report-ms", "100",
                "--guard-sigbus"});
  ASSERT_NE(producer, nullptr);
  json last;
  ASSERT_TRUE(daemon->wait_status([&](const json& s) {
    return u64(producer_entry(s, producer->pid()), "received") >= 50;
  }, kSettleTimeout, &last));
  std::string segment;
  for (const auto& e : std::filesystem::directory_iterator(runtime_dir_)) {
    if (e.path().extension() == ".seg") segment = e.path().string();
  }
  ASSERT_FALSE(segment.empty()) << "no segment in " << runtime_dir_;
  ASSERT_EQ(::truncate(segment.c_str(), 4096), 0) << std::strerror(errno);  // the header page stays
  const json again = progress_line(producer, [](const json& l) { return u64(l, "connections") >= 2; }, kSettleTimeout);
  ASSERT_TRUE(again.is_object()) << "the producer did not register again";
  ASSERT_TRUE(daemon->wait_status([&](const json& s) {
    return u64(producer_entry(s, producer->pid()), "received") >= 20;  // the new segment's counters
  }, kSettleTimeout, &last)) << last.dump(2);
  EXPECT_EQ(u64(last["workers"][0], "restarts"), 0u) << last["workers"][0].dump();
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  ASSERT_TRUE(final_line(producer).is_object());
  release_producer(producer);
  terminate_daemon(daemon);
  EXPECT_THAT(daemon->log(), HasSubstr("was truncated under us"));
  EXPECT_THAT(daemon->log(), ::testing::Not(HasSubstr("signal 7")));
}

// 3. kill -9 the supervisor: producers keep running (pushes count as not connected), and
// reconnect to a new daemon on the same session; their later pushes arrive.
TEST_F(IntegrationTest, KilledDaemonProducersSurviveAndReconnect) {
  const std::string name = session("dkill");
  const std::string config = write_config(10);
  DaemonProcess* first = start_ready_daemon(name, output_dir("first"), 1, config);
  ASSERT_NE(first, nullptr);
  const std::vector<std::string> args = {"--count", "0", "--stdin-control", "--sleep-us", "2000",
                                         "--streams", "2", "--report-ms", "50"};
  ChildProcess* stays = start_producer(name, 0, args);  // reconnects to the second daemon
  ChildProcess* leaves = start_producer(name, 1, args);  // exits while no daemon runs
  ASSERT_NE(stays, nullptr);
  ASSERT_NE(leaves, nullptr);

  json last;
  ASSERT_TRUE(first->wait_status([&](const json& s) {
    for (auto* p : {stays, leaves}) {
      if (u64(producer_entry(s, p->pid()), "received") == 0) return false;
    }
    return true;
  }, kProgressTimeout, &last)) << "the first daemon did not receive records from both producers:\n"
                               << last.dump(2);

  ASSERT_TRUE(first->process().send_signal(SIGKILL));
  auto killed = first->process().wait_exit(kExitTimeout);
  ASSERT_TRUE(killed.has_value());
  EXPECT_EQ(killed->signal, SIGKILL);

  // Both producers go on pushing and count their pushes as not connected.
  int64_t stays_calls_disconnected = -1;
  for (auto* p : {stays, leaves}) {
    const json j = progress_line(p, [](const json& l) { return u64(l, "not_connected") > 0; }, kSettleTimeout);
    ASSERT_TRUE(j.is_object()) << "producer " << p->pid() << " never reported a not-connected push";
    EXPECT_TRUE(p->running());
    if (p == stays) stays_calls_disconnected = j.value("calls", int64_t{-1});
  }

  ASSERT_TRUE(leaves->write_stdin("stop\n"));
  const json left = final_line(leaves);
  ASSERT_TRUE(left.is_object());
  expect_accounted(left, "producer that left");
  EXPECT_GT(u64(left, "not_connected"), 0u);
  EXPECT_EQ(u64(left, "connections"), 1u);
  release_producer(leaves);

  DaemonProcess* second = start_ready_daemon(name, output_dir("second"), 1, config);
  ASSERT_NE(second, nullptr);
  const json reconnected = progress_line(stays, [](const json& l) { return u64(l, "connections") >= 2; },
                                         kSettleTimeout);
  ASSERT_TRUE(reconnected.is_object()) << "the producer did not reconnect to the new daemon";
  ASSERT_TRUE(second->wait_status([&](const json& s) {
    return u64(producer_entry(s, stays->pid()), "received") > 0;
  }, kProgressTimeout, &last)) << "the reconnected producer's records do not reach the new daemon:\n"
                               << last.dump(2);

  ASSERT_TRUE(stays->write_stdin("stop\n"));
  const json stayed = final_line(stays);
  ASSERT_TRUE(stayed.is_object());
  expect_accounted(stayed, "producer that stayed");
  EXPECT_GT(u64(stayed, "not_connected"), 0u);
  EXPECT_GE(u64(stayed, "connections"), 2u);

  // The new segment's counters: what the second daemon got from this producer.
  ASSERT_TRUE(second->wait_status([&](const json& s) {
    const json p = producer_entry(s, stays->pid());
    return p.is_object() && u64(p, "received") == u64(p, "pushed");
  }, kSettleTimeout, &last)) << last.dump(2);
  const json entry = producer_entry(last, stays->pid());
  const uint64_t pushed_to_second = u64(entry, "pushed");
  EXPECT_EQ(u64(entry, "dropped_invalid"), 0u);
  EXPECT_GT(pushed_to_second, 0u);
  EXPECT_LT(pushed_to_second, u64(stayed, "pushed"));
  release_producer(stays);
  EXPECT_TRUE(second->wait_status([](const json& s) { return s["producers"].empty(); }, kSettleTimeout, &last))
      << last.dump(2);

  terminate_daemon(second);
  const auto files = index_or_fail(second->session_dir());
  ASSERT_FALSE(files.empty()) << "the second daemon wrote no file";
  int64_t frames = 0;
  for (const auto& f : files) {
    frames += f.value("frames", int64_t{0});
    EXPECT_EQ(f.value("rank", -1), 0) << f.dump();
    EXPECT_THAT(f.value("stream", ""), ::testing::StartsWith("r0.")) << f.dump();
    EXPECT_GE(f.value("first_step", int64_t{-1}), stays_calls_disconnected) << f.dump();
  }
  EXPECT_EQ(frames, static_cast<int64_t>(pushed_to_second));
  verify_session_dir(second->session_dir(), files, /*every_video_listed=*/true);
}

// 4. SIGTERM while producers push: exit 0 in time, every open video finalized and listed.
// One producer pushes as fast as it can (far faster than frames render: its ring stays
// full), the other at a training-loop pace.
TEST_F(IntegrationTest, SigtermWhileProducersPushFinalizesEveryVideo) {
  const std::string name = session("term");
  // max_frames larger than anything pushed here: every file is finished by the SIGTERM.
  // Frames render slower than the fast producer pushes, so its ring is full at SIGTERM;
  // shutdown_timeout_ms bounds how long finalizing may take before workers are killed.
  DaemonProcess* daemon = start_ready_daemon(
      name, output_dir("term"), 2, write_config(100000, /*shutdown_timeout_ms=*/60000, 320, 240));
  ASSERT_NE(daemon, nullptr);
  std::vector<ChildProcess*> producers;
  producers.push_back(start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "0", "--streams", "3",
                "--max-elements", "256"}));
  producers.push_back(start_producer(
      name, 1, {"--count", "0", "--stdin-control", "--sleep-us", "2000", "--streams", "3"}));
  for (auto* p : producers) ASSERT_NE(p, nullptr);

  // Wait until every stream has rendered frames (its video is open).
  json last;
  ASSERT_TRUE(daemon->wait_status([&](const json& s) {
    std::set<std::string> streams;  // (rank, name): shapes vary, so one name may use several modes
    for (const auto& w : s["workers"]) {
      for (const auto& st : w["stats"].value("streams", json::array())) {
        if (u64(st, "frames") >= 5) streams.insert(std::to_string(st.value("rank", -1)) + "/" + st.value("stream", ""));
      }
    }
    return streams.size() == 6;
  }, kSettleTimeout, &last)) << last.dump(2);
  std::map<std::string, int64_t> frames_seen;
  for (const auto& w : last["workers"]) {
    for (const auto& st : w["stats"].value("streams", json::array())) {
      frames_seen[stream_key(st.value("stream", ""), st.value("rank", -1))] = st.value("frames", int64_t{0});
    }
  }
  EXPECT_TRUE(index_or_fail(daemon->session_dir()).empty());

  const double seconds = terminate_daemon(daemon, 90s);
  std::fprintf(stderr, "[ timing ] SIGTERM with producers pushing -> exit in %.2f s\n", seconds);
  EXPECT_THAT(daemon->log(), ::testing::Not(HasSubstr("did not finish in time")));

  const auto files = index_or_fail(daemon->session_dir());
  const auto frames = frames_by_stream(files);
  for (const auto& [key, n] : frames_seen) {
    ASSERT_TRUE(frames.count(key)) << key << " had an open video but nothing is listed";
    EXPECT_GE(frames.at(key), n) << key;
  }
  EXPECT_EQ(frames.size(), frames_seen.size());
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);

  // The producers lived through it and finish normally.
  for (auto* p : producers) {
    EXPECT_TRUE(p->running());
    ASSERT_TRUE(p->write_stdin("stop\n"));
    const json f = final_line(p);
    ASSERT_TRUE(f.is_object());
    expect_accounted(f, "producer");
    release_producer(p);
  }
}

// 5. Two daemons, two sessions, one runtime dir: no cross-talk.
TEST_F(IntegrationTest, TwoSessionsSideBySideKeepTheirOwnStreams) {
  const std::string config = write_config(25);
  struct Side {
    std::string session;
    int rank;
    int streams;
    DaemonProcess* daemon = nullptr;
    ChildProcess* producer = nullptr;
    json final;
  };
  std::vector<Side> sides = {{session("left"), 0, 3, nullptr, nullptr, nullptr},
                             {session("right"), 1, 5, nullptr, nullptr, nullptr}};
  for (auto& side : sides) {
    side.daemon = start_ready_daemon(side.session, output_dir(side.session), 1, config);
    ASSERT_NE(side.daemon, nullptr);
  }
  for (auto& side : sides) {
    side.producer = start_producer(side.session, side.rank,
                                   {"--count", "200", "--streams", std::to_string(side.streams),
                                    "--stdin-control"});
    ASSERT_NE(side.producer, nullptr);
  }
  for (auto& side : sides) {
    side.final = final_line(side.producer);
    ASSERT_TRUE(side.final.is_object());
    expect_accounted(side.final, side.session);
    json last;
    EXPECT_TRUE(side.daemon->wait_status([&](const json& s) {
      const auto producers = s.value("producers", json::array());
      const json p = producer_entry(s, side.producer->pid());
      return producers.size() == 1 && p.is_object() && u64(p, "received") == u64(side.final, "pushed");
    }, kSettleTimeout, &last)) << side.session << ":\n" << last.dump(2);
    EXPECT_EQ(last.value("session", ""), side.session);
  }
  for (auto& side : sides) release_producer(side.producer);
  for (auto& side : sides) {
    json last;
    EXPECT_TRUE(side.daemon->wait_status([](const json& s) { return s["producers"].empty(); },
                                         kSettleTimeout, &last))
        << last.dump(2);
    terminate_daemon(side.daemon);
  }
  for (auto& side : sides) {
    SCOPED_TRACE(side.session);
    std::map<std::string, int64_t> expected;
    add_expected(side.final, side.rank, &expected);
    EXPECT_EQ(expected.size(), static_cast<size_t>(side.streams));
    const auto files = index_or_fail(side.daemon->session_dir());
    EXPECT_EQ(frames_by_stream(files), expected);
    verify_session_dir(side.daemon->session_dir(), files, /*every_video_listed=*/true);
  }
}

// 6. The status tool, a second daemon on the same session, a client of another ABI.
TEST_F(IntegrationTest, StatusToolDuplicateDaemonAndAbiMismatch) {
  const std::string name = session("cli");
  const std::vector<std::string> status_args = {"status", "--session", name, "--runtime-dir",
                                                runtime_dir_, "--json"};
  CommandResult none = run_cli(status_args);
  ASSERT_FALSE(none.timed_out);
  EXPECT_TRUE(none.exit.exited && none.exit.code == 1) << none.exit.describe() << "\n" << none.err;
  EXPECT_THAT(none.err, HasSubstr("no daemon"));

  DaemonProcess* daemon = start_ready_daemon(name, output_dir("cli"), 2, write_config(50));
  ASSERT_NE(daemon, nullptr);

  CommandResult ok = run_cli(status_args);
  ASSERT_FALSE(ok.timed_out);
  EXPECT_TRUE(ok.exit.exited && ok.exit.code == 0) << ok.exit.describe() << "\n" << ok.err;
  const json reply = json::parse(ok.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(reply.is_object()) << "not JSON: " << ok.out;
  EXPECT_EQ(reply.value("type", ""), "status");
  EXPECT_EQ(reply.value("session", ""), name);
  EXPECT_EQ(reply.value("pid", 0LL), static_cast<long long>(daemon->process().pid()));
  ASSERT_TRUE(reply.contains("workers") && reply["workers"].is_array());
  EXPECT_EQ(reply["workers"].size(), 2u);
  EXPECT_TRUE(reply.contains("producers") && reply["producers"].is_array());
  CommandResult table = run_cli({"status", "--session", name, "--runtime-dir", runtime_dir_});
  EXPECT_TRUE(table.exit.exited && table.exit.code == 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(name));

  // A second daemon for the same session refuses to start and leaves the first alone.
  DaemonProcess* twin = start_daemon(name, output_dir("cli-twin"), 1, write_config(50));
  ASSERT_NE(twin, nullptr);
  auto twin_exit = twin->process().wait_exit(kStartTimeout);
  ASSERT_TRUE(twin_exit.has_value()) << "a second daemon on the same session kept running";
  EXPECT_TRUE(twin_exit->exited && twin_exit->code != 0) << twin_exit->describe();
  EXPECT_THAT(twin->log(), HasSubstr("already")) << "the refusal should say a daemon already runs";
  EXPECT_THAT(twin->log(), HasSubstr(daemon->socket_path()));
  EXPECT_TRUE(daemon->process().running());
  EXPECT_TRUE(daemon->status().is_ok());

  // A registration with a wrong ABI version is refused with a clear message.
  const std::string segment = name + "." + std::to_string(::getpid()) + ".0.seg";
  // A well-formed registration of this process, with the given versions.
  const auto registration = [&](json versions) {
    json request = {{"type", "register"}, {"pid", ::getpid()}, {"rank", 0},
                    {"session", name},    {"segment", segment}, {"segment_size", 1 << 20}};
    request.update(versions);
    return request;
  };
  auto refusal = request_reply(daemon->socket_path(), registration({{"abi", 999}}));
  ASSERT_TRUE(refusal.is_ok()) << refusal.message();
  EXPECT_EQ(refusal->value("type", ""), "error") << refusal->dump();
  EXPECT_THAT(refusal->value("message", ""), HasSubstr("ABI version"));
  EXPECT_THAT(refusal->value("message", ""), HasSubstr("999"));
  // So is one with another control protocol version.
  auto other_protocol =
      request_reply(daemon->socket_path(), registration({{"abi", wire::kAbiVersion}, {"protocol", 999}}));
  ASSERT_TRUE(other_protocol.is_ok()) << other_protocol.message();
  EXPECT_EQ(other_protocol->value("type", ""), "error") << other_protocol->dump();
  EXPECT_THAT(other_protocol->value("message", ""), HasSubstr("control protocol version 999"));

  // Malformed requests from a same-uid peer are refused, never crash the daemon.
  const std::vector<json> malformed = {
      {{"type", 1}},
      json::array({1, 2, 3}),
      {{"type", "register"}, {"abi", 1}, {"session", 42}},
      {{"type", "register"}, {"abi", 1}, {"session", name}, {"segment", "../../etc/passwd"}},
      {{"type", "register"}, {"abi", 1}, {"session", name}, {"segment", segment}},  // no such file
  };
  for (const json& request : malformed) {
    auto reply = request_reply(daemon->socket_path(), request);
    ASSERT_TRUE(reply.is_ok()) << request.dump() << ": " << reply.message();
    EXPECT_EQ(reply->value("type", ""), "error") << request.dump() << " -> " << reply->dump();
    EXPECT_TRUE(daemon->process().running()) << "the daemon died on " << request.dump();
  }

  // The daemon keeps serving: status answers and a real producer gets through.
  auto after = daemon->status();
  ASSERT_TRUE(after.is_ok()) << after.message();
  EXPECT_GE(u64(*after, "registrations_refused"), 4u);  // the ABI one and three bad registrations
  ChildProcess* producer = start_producer(name, 0, {"--count", "30", "--streams", "1", "--stdin-control"});
  ASSERT_NE(producer, nullptr);
  const json f = final_line(producer);
  ASSERT_TRUE(f.is_object());
  expect_accounted(f, "producer");
  EXPECT_EQ(u64(f, "connections"), 1u);
  EXPECT_EQ(u64(f, "pushed") + u64(f, "dropped_full"), 30u);
  release_producer(producer);

  terminate_daemon(daemon);
  CommandResult gone = run_cli(status_args);
  EXPECT_TRUE(gone.exit.exited && gone.exit.code == 1) << gone.exit.describe();
  const auto files = index_or_fail(daemon->session_dir());
  EXPECT_EQ(frames_by_stream(files), (std::map<std::string, int64_t>{{stream_key("r0.s0", 0), u64(f, "pushed")}}));
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
}

// 7. A producer trains a small CNN with track_model and track_layer: every tracked
// stream arrives as videos listed in index.json, with its kind and one frame per
// admitted step.
TEST_F(IntegrationTest, TrackedModelStreamsBecomeVideos) {
  const std::string name = session("track");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("track"), 1, write_config(100));
  ASSERT_NE(daemon, nullptr);
  constexpr int kSteps = 12, kEveryN = 3;
  ChildProcess* producer = start_producer(
      name, 0, {"--track-model", "--count", std::to_string(kSteps), "--every-n", std::to_string(kEveryN),
                "--stdin-control"});
  ASSERT_NE(producer, nullptr);
  const json f = final_line(producer);
  ASSERT_TRUE(f.is_object()) << "the producer printed no final line";
  const std::set<std::string> tracked = f.value("tracked", json::array()).get<std::set<std::string>>();
  const std::set<std::string> expected_tracked = {"model.0", "model.1", "model.4", "model.0.grad",
                                                  "model.1.grad", "model.4.grad"};
  EXPECT_EQ(tracked, expected_tracked);
  // 6 tracked streams and the model's module tree on every 3rd step, and the loss on
  // every step.
  EXPECT_EQ(u64(f, "pushed"), 7u * (kSteps / kEveryN) + kSteps) << f.dump();
  EXPECT_EQ(u64(f, "dropped_full") + u64(f, "refused") + u64(f, "not_connected"), 0u) << f.dump();
  json last;
  EXPECT_TRUE(daemon->wait_status([&](const json& s) {
    const json p = producer_entry(s, producer->pid());
    return p.is_object() && u64(p, "received") >= u64(f, "pushed");
  }, kSettleTimeout, &last)) << last.dump(2);
  release_producer(producer);
  terminate_daemon(daemon);

  const auto files = index_or_fail(daemon->session_dir());
  std::map<std::string, int64_t> frames;
  std::map<std::string, std::string> kinds;
  for (const auto& file : files) {
    frames[file.value("stream", "")] += file.value("frames", int64_t{0});
    kinds[file.value("stream", "")] = file.value("kind", "");
  }
  for (const auto& stream : expected_tracked) {
    EXPECT_EQ(frames[stream], kSteps / kEveryN) << stream;
    EXPECT_EQ(kinds[stream], stream.find(".grad") != std::string::npos ? "gradient" : "activation") << stream;
  }
  EXPECT_EQ(frames["loss"], kSteps);
  EXPECT_EQ(frames.size(), expected_tracked.size() + 1);
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);

  // The module tree log: the first logged step in full (the Sequential's modules that own
  // tensors, under the container, with the shapes this batch gives), then the same calls.
  const std::string tree_path =
      daemon->session_dir() + "/tree/rank0_pid" + std::to_string(producer->pid()) + ".log";
  std::ifstream in(tree_path);
  ASSERT_TRUE(in.good()) << tree_path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::vector<std::string> expected_lines = {
      "# tensorscope module tree log",
      "== step 0 | model | 3 calls | first logged step",
      "    model",
      "      model.0  Conv2d       float32[8,1,8,8]@cpu -> float32[8,4,6,6]@cpu",
      "      model.1  BatchNorm2d  float32[8,4,6,6]@cpu -> float32[8,4,6,6]@cpu",
      "      model.4  Linear       float32[8,144]@cpu -> float32[8,3]@cpu",
      "== step 3 | model | 3 calls | same as step 0",
      "== step 6 | model | 3 calls | same as step 3",
      "== step 9 | model | 3 calls | same as step 6"};
  EXPECT_EQ(lines, expected_lines);
}

}  // namespace
}  // namespace tensorscope::itest
