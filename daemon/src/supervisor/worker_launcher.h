// worker_launcher.h — how the supervisor starts a worker process: WorkerLauncher, the
// seam, and ForkExecLauncher, the real one (fork, then exec of tensorscoped
// --worker-fd 3).
//
// Used by the supervisor (one launcher for all its workers). The supervisor makes each
// worker's channel (a socketpair) and passes the worker's end; what launch() returns is
// the pid of a child process of the caller, which the supervisor watches with waitpid
// and kills with SIGKILL (so a launcher for tests must start a real child too).
// Thread safety: launch() is called from the supervisor's single thread; the child runs
// only async-signal-safe code until exec.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

#include "tensorscope/base/status.h"

namespace tensorscope::daemon {

class WorkerLauncher {
 public:
  virtual ~WorkerLauncher() = default;
  // Starts worker `worker_index`, serving the control protocol on `channel_fd` (the
  // worker's end of its channel; the caller keeps and closes its own copy). Returns the
  // child's pid; an error when no process could be started.
  virtual StatusOr<pid_t> launch(int worker_index, int channel_fd) = 0;
};

// fork + exec of `executable --worker-fd 3`: the channel becomes descriptor 3 (without
// close-on-exec), SIGCHLD and SIGPIPE go back to their defaults, SIGINT and SIGTERM are
// ignored (a terminal's ^C and `kill -- -PGID` reach the whole group: the supervisor tells
// its workers to finalize, and a worker whose supervisor is gone finalizes on its own).
// A child whose exec fails exits with status 127.
class ForkExecLauncher : public WorkerLauncher {
 public:
  explicit ForkExecLauncher(std::string executable) : executable_(std::move(executable)) {}
  StatusOr<pid_t> launch(int worker_index, int channel_fd) override;

 private:
  const std::string executable_;
};

}  // namespace tensorscope::daemon
