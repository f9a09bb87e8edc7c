// daemon_autostart.h — ClientOptions::autostart: starting tensorscoped for a session
// that has no daemon, from inside the training process, without harming it.
//
// Used by Connection's background thread only (never the training thread). The daemon
// is launched with posix_spawn (no fork of the training process's address space) as
// `tensorscoped --detach ...` in a session of its own, stdin on /dev/null, stdout and
// stderr appended to <output>/<session>/tensorscoped.log, signals at their defaults. With
// --detach the spawned process forks the daemon proper and exits once it listens (0),
// when another daemon already serves the session (3), or when it cannot start (its
// status, the reason in the log), so the daemon is never a child of the training process.
// Ranks starting together: the one that takes the session's autostart lock launches;
// the others wait for its socket (at most kWaitForOtherMs: a lock kept by a forked
// child of the launcher must not stop them for good). The daemon itself takes the
// session lock, so however many are launched, one serves. Failures are a state
// (stats().autostart), never an exception; a daemon that cannot be found or configured
// is not tried again. The environment (and the search path in it) and the output
// directory are taken when the object is made (on the thread that makes the Client: the
// environment is not read from
// another thread while the program may change it); the search for it happens at the
// first launch, on the connection thread.
// Thread safety: construction on any thread, then one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope {

struct AutostartConfig {
  std::string executable;   // "" = find_daemon_executable's search
  std::string config_path;  // "" = the daemon's built-in defaults
  std::string output_dir;   // made absolute against the working directory
  std::string session;
  std::string runtime_dir;
  int idle_exit_ms = 30000;  // the daemon exits once no producer was connected this long
};

// Where to look for tensorscoped: the configured path and the environment's say, copied
// (from_environment reads the environment: call it on the thread that may change it).
struct DaemonSearch {
  std::string configured;                 // ClientOptions::daemon_executable
  std::optional<std::string> env_daemon;  // $TENSORSCOPE_DAEMON
  std::string path;                       // $PATH
  static DaemonSearch from_environment(const std::string& configured);
};

// tensorscoped, looked for in order: `configured`, $TENSORSCOPE_DAEMON, beside the
// executable or shared library that holds the client (and ../bin from there), the
// install prefix's bin directory, then $PATH. The error lists where it looked. Touches
// the filesystem (stat of each candidate): not for the training thread.
StatusOr<std::string> find_daemon_executable(const DaemonSearch& search);

class DaemonAutostart {
 public:
  explicit DaemonAutostart(AutostartConfig config);
  ~DaemonAutostart();
  DaemonAutostart(const DaemonAutostart&) = delete;
  DaemonAutostart& operator=(const DaemonAutostart&) = delete;

  // Called while no daemon answers for the session: launches one when nobody is
  // launching, the retry delay after a failure has passed and the failure was not
  // final; otherwise checks on the launch in progress. True when a daemon should answer
  // now (ours is up, or another one serves the session): worth connecting at once.
  bool step(int64_t now_ms);
  // The client registered with a daemon (whoever started it); ours, if we launched one
  // and its launcher has not exited with another outcome yet.
  void on_connected(int64_t now_ms);
  // Collects the launch's outcome (and frees the autostart lock) while connected.
  void poll(int64_t now_ms) {
    if (child_ > 0) (void)check_child(now_ms);
  }

  // A launch (ours or another process's, per the autostart lock) is under way: worth
  // waiting for a little longer.
  bool in_progress() const { return child_ > 0 || waiting_for_other_; }
  // Will never launch again (no executable, the daemon refused its arguments).
  bool given_up() const { return given_up_; }
  // For ClientStats::autostart: what happened, in words.
  const std::string& state() const { return state_; }

 private:
  void launch(int64_t now_ms);
  bool check_child(int64_t now_ms);
  void fail(const std::string& why, bool final, int64_t now_ms);
  void release_lock();
  std::string started_state() const;

  AutostartConfig config_;  // output_dir made absolute at construction
  DaemonSearch search_;
  std::optional<StatusOr<std::string>> executable_;  // found at the first launch
  std::vector<std::string> environment_;             // copied at construction
  std::string log_path_;
  int64_t waiting_since_ms_ = -1;
  pid_t child_ = -1;
  int lock_fd_ = -1;
  bool waiting_for_other_ = false;
  bool given_up_ = false;
  int failures_ = 0;
  int64_t next_try_ms_ = 0;
  int64_t launched_ms_ = 0;
  std::string state_;
};

}  // namespace tensorscope
