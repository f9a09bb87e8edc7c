// process_start.cc — see process_start.h.
#include "process_start.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "tensorscope/shared/daemon_exit_status.h"

namespace tensorscope::daemon {

void detach(int* ready_fd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("tensorscoped: pipe");
    std::exit(kDaemonExitStartFailed);
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("tensorscoped: fork");
    std::exit(kDaemonExitStartFailed);
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::setsid();  // a session of its own, whoever started us
    *ready_fd = fds[1];
    return;
  }
  ::close(fds[1]);
  char byte = 0;
  pollfd p{fds[0], POLLIN, 0};
  // Start-up includes waiting for a previous daemon of the session to finish.
  if (::poll(&p, 1, 10 * 60 * 1000) <= 0) ::_exit(kDaemonExitStartFailed);
  if (::read(fds[0], &byte, 1) == 1 && byte == 'R') ::_exit(0);
  int status = 0;  // no word and the pipe closed: the daemon is exiting
  if (::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  ::_exit(kDaemonExitStartFailed);
}

std::string self_executable(const char* argv0) {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n > 0) return std::string(buffer, static_cast<size_t>(n));
  return argv0;
}

}  // namespace tensorscope::daemon
