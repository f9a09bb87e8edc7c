// subprocess.h — runs a program to completion with its output captured: stdin from
// /dev/null, stdout and stderr read through pipes (both at once, so a chatty program
// never blocks on a full pipe), a deadline after which it is killed.
//
// Used by the daemon's run_info helper (git). The program runs in a process group of
// its own, with SIGPIPE, SIGINT, SIGTERM, SIGCHLD and SIGHUP at their defaults and no
// signal blocked; on a timeout, or when stdout passes its bound, the whole group is
// killed (SIGKILL), so whatever the program started goes too. The call blocks until the
// program has exited and been reaped.
// Thread safety: reentrant (posix_spawn; pipes and descriptors close-on-exec). It waits
// for its own child by pid: a caller that reaps every child (waitpid(-1)) on another
// thread would take that status away.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope {

struct SubprocessOptions {
  int timeout_ms = 10000;  // from the start; then the group is killed (timed_out)
  // More stdout than this: the group is killed and the output cut here (truncated).
  std::size_t max_stdout_bytes = std::size_t{64} << 20;
  // More stderr than this is read and dropped; the program runs on.
  std::size_t max_stderr_bytes = std::size_t{64} << 10;
  // The environment ("NAME=value" entries); nullopt: this process's.
  std::optional<std::vector<std::string>> env;
};

struct SubprocessResult {
  int exit_code = -1;      // its exit status; -1 when killed (by a signal, or here)
  bool timed_out = false;  // killed at the deadline
  bool truncated = false;  // killed because stdout passed max_stdout_bytes
  std::string out;         // stdout, at most max_stdout_bytes
  std::string err;         // stderr, at most max_stderr_bytes
};

// Runs argv[0] (looked up in PATH unless it holds a '/') with `argv`. A program that
// runs and fails is a result (exit_code, timed_out); errors are only for a program that
// could not be started: "cannot run <argv[0]>: No such file or directory", "pipe: ...",
// an empty argv.
StatusOr<SubprocessResult> run_subprocess(const std::vector<std::string>& argv, const SubprocessOptions& options = {});

}  // namespace tensorscope
