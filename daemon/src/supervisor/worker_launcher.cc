// worker_launcher.cc — see worker_launcher.h.
#include "supervisor/worker_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "tensorscope/base/posix_file.h"

namespace tensorscope::daemon {

StatusOr<pid_t> ForkExecLauncher::launch(int /*worker_index*/, int channel_fd) {
  const char* argv[] = {executable_.c_str(), "--worker-fd", "3", nullptr};
  const pid_t pid = ::fork();
  if (pid < 0) return Status::error("fork: " + errno_text(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (channel_fd == 3) {
      ::fcntl(3, F_SETFD, 0);  // dup2 onto itself would keep FD_CLOEXEC
    } else {
      ::dup2(channel_fd, 3);  // dup2 clears FD_CLOEXEC on the copy
    }
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    for (int s : {SIGCHLD, SIGPIPE}) ::sigaction(s, &sa, nullptr);
    // Workers ignore SIGINT and SIGTERM (a terminal's ^C, `kill -- -PGID` and service
    // managers reach the whole group): the supervisor tells them to finalize, and a
    // worker whose supervisor is gone finalizes on its own.
    sa.sa_handler = SIG_IGN;
    for (int s : {SIGINT, SIGTERM}) ::sigaction(s, &sa, nullptr);
    ::execv(argv[0], const_cast<char* const*>(argv));
    ::_exit(127);
  }
  return pid;
}

}  // namespace tensorscope::daemon
