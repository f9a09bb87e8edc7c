// daemon_process.h — the integration tests' harness: child processes (tensorscoped,
// the `tensorscope` tool, test_producer), status queries and index.json (decoding videos:
// video_frames.h).
//
// Used only by the integration tests (one test process). Every child is started with
// fork+exec in its own process group, so that killing the group also kills the workers
// a daemon forked (even after the supervisor itself was killed); the destructor of a
// ChildProcess SIGKILLs its group and reaps it, so a failed assertion never leaves
// processes behind. Every wait polls with a deadline; nothing sleeps to synchronize.
// Thread safety: none; one test thread owns everything here.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorscope/base/status.h"

namespace tensorscope::itest {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// How a child ended: exited with `code`, or was killed by `signal`.
struct ExitInfo {
  bool exited = false;
  int code = -1;
  int signal = 0;
  std::string describe() const;
};

// Polls `condition` every few milliseconds until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& condition, Millis timeout, Millis period = Millis(10));

class ChildProcess {
 public:
  struct Options {
    std::vector<std::string> argv;  // argv[0] is the executable path
    std::vector<std::string> env;   // extra "KEY=VALUE" entries
    std::string stderr_path;        // stderr (and stdout unless piped) go here
    bool pipe_stdin = false;        // the test writes to / closes stdin
    bool pipe_stdout = false;       // the test reads stdout line by line
  };

  // Starts the child; nullptr and *error on failure.
  static std::unique_ptr<ChildProcess> start(const Options& options, std::string* error);
  ~ChildProcess();  // SIGKILLs the whole process group and reaps the child
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  // Sends `signo` to the child itself (not its group). False once it was reaped.
  bool send_signal(int signo);
  // Reaps without blocking; true while the child has not exited.
  bool running();
  // Waits for the exit until `timeout`; nullopt if it is still running then.
  std::optional<ExitInfo> wait_exit(Millis timeout);
  const std::optional<ExitInfo>& exit_info() const { return exit_; }
  // SIGKILLs the process group (the child and everything it forked) and reaps the child.
  void kill_group();

  // stdin control (pipe_stdin): write bytes / close (EOF).
  bool write_stdin(const std::string& text);
  void close_stdin();

  // stdout lines (pipe_stdout). next_line waits up to `timeout` for one more complete
  // line; all_lines() returns every line read so far.
  std::optional<std::string> next_line(Millis timeout);
  // Reads whatever is available now without blocking.
  void pump_stdout();
  const std::vector<std::string>& all_lines() const { return lines_; }
  // Reads lines until one satisfies `predicate` (checked on every line, old ones too).
  std::optional<std::string> wait_for_line(const std::function<bool(const std::string&)>& predicate, Millis timeout);

  std::string stderr_text() const;

 private:
  ChildProcess() = default;
  bool reap(int flags);

  pid_t pid_ = -1;
  std::string name_;
  std::string stderr_path_;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  bool stdout_eof_ = false;
  std::string partial_;
  std::vector<std::string> lines_;
  size_t lines_checked_ = 0;
  std::optional<ExitInfo> exit_;
};

// Runs a command to completion (stdout captured, stderr to a file under `log_dir`).
struct CommandResult {
  ExitInfo exit;
  std::string out;
  std::string err;
  bool timed_out = false;
};
CommandResult run_command(const std::vector<std::string>& argv, const std::string& log_dir, Millis timeout);

// One status request over the session socket (a framed JSON {"type":"status"}).
StatusOr<nlohmann::json> query_status(const std::string& socket_path, int timeout_ms = 3000);

// Sends `request` to the socket and returns the single reply.
StatusOr<nlohmann::json> request_reply(const std::string& socket_path, const nlohmann::json& request,
                                       int timeout_ms = 3000);

// Parsed <session dir>/index.json ("files" array); empty when there is none yet.
StatusOr<std::vector<nlohmann::json>> read_index(const std::string& session_dir);

// Names in `dir` (no recursion) for which `predicate` holds.
std::vector<std::string> list_dir(const std::string& dir, const std::function<bool(const std::string&)>& predicate);

// Parses one JSON line; a discarded value when it is not JSON.
nlohmann::json parse_json_line(const std::string& line);

// The first JSON object line on `child`'s stdout (pipe_stdout) for which `predicate`
// holds, old lines included; null at the deadline.
nlohmann::json wait_json_line(ChildProcess& child, const std::function<bool(const nlohmann::json&)>& predicate,
                              Millis timeout);

// A tensorscoped supervisor (and, in its process group, its workers).
struct DaemonSpec {
  std::string executable;
  std::string config_path;
  std::string runtime_dir;
  std::string session;
  std::string output_dir;
  int workers = 1;
  std::string log_path;  // the daemon's stdout and stderr
};

class DaemonProcess {
 public:
  static std::unique_ptr<DaemonProcess> start(const DaemonSpec& spec, std::string* error);

  // Waits until the socket answers a status request; fails early when the daemon exits.
  Status wait_ready(Millis timeout);
  StatusOr<nlohmann::json> status(int timeout_ms = 3000) const { return query_status(socket_path(), timeout_ms); }
  // Polls status until `predicate` holds (the last reply in *last); false at the deadline.
  bool wait_status(const std::function<bool(const nlohmann::json&)>& predicate, Millis timeout,
                   nlohmann::json* last = nullptr) const;

  std::string socket_path() const;
  std::string session_dir() const { return spec_.output_dir + "/" + spec_.session; }
  const DaemonSpec& spec() const { return spec_; }
  ChildProcess& process() { return *process_; }
  std::string log() const { return process_->stderr_text(); }

 private:
  DaemonSpec spec_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace tensorscope::itest
