// integration_fixture.h — what the daemon's end-to-end tests share: IntegrationTest (a
// ProcessFixture that starts daemons and test_producer processes in a private temporary
// directory and kills them all in TearDown), the timeouts, and the checks a user would
// make (every record accounted for, every listed video playing with its frame count).
//
// Used by the integration tests (integration_test.cc, many_streams_test.cc,
// crash_test.cc, output_test.cc, stall_test.cc). Thread safety: test code, one thread.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
#include "video_frames.h"
#include "process_fixture.h"
#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/wire_format.h"
#include "temp_dir.h"

namespace tensorscope::itest {

using nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr Millis kStartTimeout = 30s;      // daemon answers status
constexpr Millis kProducerTimeout = 240s;  // a producer finishes its pushes
constexpr Millis kSettleTimeout = 90s;     // the daemon catches up / drains
constexpr Millis kExitTimeout = 60s;       // a process exits after being told to
constexpr Millis kProgressTimeout = 30s;   // records keep flowing through a live daemon

inline bool is_temp_video(const std::string& name) { return name.rfind(".tmp-", 0) == 0; }
inline bool is_final_video(const std::string& name) {
  return !is_temp_video(name) && name.size() > 4 && name.compare(name.size() - 4, 4, ".mp4") == 0;
}

inline std::string stream_key(const std::string& stream, int rank) { return stream + "@rank" + std::to_string(rank); }

inline uint64_t u64(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].get<uint64_t>();
}

// The status entry of the producer with this pid, or null.
inline json producer_entry(const json& status, pid_t pid) {
  for (const auto& p : status.value("producers", json::array())) {
    if (p.value("pid", 0LL) == static_cast<long long>(pid)) return p;
  }
  return nullptr;
}

// "frames per (stream, rank)" from index entries.
inline std::map<std::string, int64_t> frames_by_stream(const std::vector<json>& files) {
  std::map<std::string, int64_t> out;
  for (const auto& f : files) {
    out[stream_key(f.value("stream", ""), f.value("rank", -1))] += f.value("frames", int64_t{0});
  }
  return out;
}

// Expected frames per (stream, rank) from a producer's final line.
inline void add_expected(const json& final_line, int rank, std::map<std::string, int64_t>* out) {
  const json per_stream = final_line.value("per_stream", json::object());
  for (const auto& [name, n] : per_stream.items()) {
    (*out)[stream_key(name, rank)] += n.get<int64_t>();
  }
}

// Every push call falls in exactly one bucket. `daemon_went_away`: a push that returned
// kPushed into a segment no daemon attached to (the daemon was killed; a registration then
// failed) is counted as not_connected when the segment is given up (client/core/
// connection.h, unattached_lost), so the producer's own count of kPushed returns may exceed
// `pushed` by at most those.
inline void expect_accounted(const json& line, const std::string& who, bool daemon_went_away = false) {
  SCOPED_TRACE(who + ": " + line.dump());
  EXPECT_EQ(u64(line, "calls"),
            u64(line, "pushed") + u64(line, "dropped_full") + u64(line, "refused") + u64(line, "not_connected") +
                u64(line, "gated"));
  EXPECT_EQ(u64(line, "refused"), u64(line, "expected_refusals"));
  uint64_t per_stream_total = 0;
  const json per_stream = line.value("per_stream", json::object());
  for (const auto& [name, n] : per_stream.items()) {
    per_stream_total += n.get<uint64_t>();
  }
  if (daemon_went_away) {
    EXPECT_GE(per_stream_total, u64(line, "pushed"));
    EXPECT_LE(per_stream_total, u64(line, "pushed") + u64(line, "not_connected"));
  } else {
    EXPECT_EQ(per_stream_total, u64(line, "pushed"));
  }
}

class IntegrationTest : public ProcessFixture {
 protected:
  IntegrationTest() : ProcessFixture("ts-itest") {}

  std::string output_dir(const std::string& tag) const { return tmp_.path() + "/out-" + tag; }

  // Small frames and short timings make the tests fast.
  std::string write_config(int max_frames, int shutdown_timeout_ms = 45000, int width = 160, int height = 120,
                           const std::string& extra_yaml = "") {
    const std::string path = tmp_.path() + "/config-" + std::to_string(configs_++) + ".yaml";
    std::ofstream out(path);
    out << "log_level: info\n"
        << "video:\n  width: " << width << "\n  height: " << height << "\n  fps: 10\n  max_frames: " << max_frames
        << "\n"
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

  DaemonProcess* start_ready_daemon(const std::string& session_name, const std::string& output, int workers,
                                    const std::string& config) {
    return ProcessFixture::start_ready_daemon({"", config, runtime_dir_, session_name, output, workers, ""},
                                              kStartTimeout);
  }

  // A daemon (one worker, 320x240 frames) writing under `output` for a producer that
  // pushes 4 streams until told to stop on its stdin, once `files` videos are listed.
  void start_writing(const std::string& session_name, const std::string& output, int files, DaemonProcess** daemon,
                     ChildProcess** producer, json* last) {
    *daemon = start_ready_daemon(session_name, output, 1, write_config(40, 45000, 320, 240));
    ASSERT_NE(*daemon, nullptr);
    *producer = start_producer(
        session_name, 0,
        {"--count", "0", "--stdin-control", "--sleep-us", "3000", "--streams", "4", "--report-ms", "100"});
    ASSERT_NE(*producer, nullptr);
    ASSERT_TRUE(
        (*daemon)->wait_status([&](const json& s) { return s.value("files", 0) >= files; }, kSettleTimeout, last))
        << last->dump(2);
  }

  ChildProcess* start_producer(const std::string& session_name, int rank, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--session",
                                     session_name,
                                     "--runtime-dir",
                                     runtime_dir_,
                                     "--rank",
                                     std::to_string(rank),
                                     "--seed",
                                     std::to_string(1000 + rank),
                                     "--wait-connect-ms",
                                     "30000"};
    args.insert(args.end(), extra.begin(), extra.end());
    return ProcessFixture::start_producer(args);
  }

  // Waits for the producer's final JSON line.
  static json final_line(ChildProcess* p, Millis timeout = kProducerTimeout) {
    return ProcessFixture::final_line(p, timeout);
  }

  // A progress (or final) line for which `predicate` holds.
  static json progress_line(ChildProcess* p, const std::function<bool(const json&)>& predicate, Millis timeout) {
    return wait_json_line(*p, predicate, timeout);
  }

  // SIGTERM and a clean exit within the deadline; returns the seconds it took.
  static double terminate_daemon(DaemonProcess* d, Millis timeout = kExitTimeout) {
    const auto t0 = Clock::now();
    EXPECT_TRUE(d->process().send_signal(SIGTERM));
    auto exit = d->process().wait_exit(timeout);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_TRUE(exit.has_value()) << "tensorscoped did not exit within " << timeout.count() << " ms of SIGTERM";
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

// Descriptors a process has open (-1 when it is gone).
inline int open_descriptors(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return ec ? -1 : n;
}

}  // namespace tensorscope::itest
