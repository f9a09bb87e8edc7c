// worker_launcher_test.cc — ForkExecLauncher: the child runs `<executable> --worker-fd 3`
// with its channel as descriptor 3, ignores SIGTERM, and exits 127 when the executable
// cannot be run; the pid returned is a child to wait for.
#include "supervisor/worker_launcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "temp_dir.h"

namespace tensorscope::daemon {
namespace {

// Runs `executable` through a ForkExecLauncher; what the child wrote to its channel, and
// its exit status.
struct Launched {
  std::string said;
  int exit_code = -1;
};

Launched launch_and_wait(const std::string& executable) {
  Launched out;
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  ForkExecLauncher launcher(executable);
  StatusOr<pid_t> pid = launcher.launch(0, fds[1]);
  ::close(fds[1]);
  EXPECT_TRUE(pid.is_ok()) << pid.message();
  if (!pid.is_ok()) {
    ::close(fds[0]);
    return out;
  }
  char buffer[256];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buffer, sizeof(buffer))) > 0) out.said.append(buffer, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(*pid, &status, 0), *pid);
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  return out;
}

TEST(ForkExecLauncher, RunsTheExecutableWithItsChannelAsDescriptor3) {
  testing::TempDir dir("launcher");
  const std::string script = dir.path() + "/worker.sh";
  {
    std::ofstream out(script);
    // SIGTERM is ignored (the supervisor tells its workers when to finish).
    out << "#!/bin/sh\nkill -TERM $$\nprintf '%s %s' \"$1\" \"$2\" >&3\nexit 7\n";
  }
  ASSERT_EQ(::chmod(script.c_str(), 0700), 0);
  const Launched launched = launch_and_wait(script);
  EXPECT_EQ(launched.said, "--worker-fd 3");
  EXPECT_EQ(launched.exit_code, 7);
}

TEST(ForkExecLauncher, AnExecutableThatCannotRunExits127) {
  const Launched launched = launch_and_wait("/nonexistent/tensorscoped");
  EXPECT_EQ(launched.said, "");
  EXPECT_EQ(launched.exit_code, 127);
}

}  // namespace
}  // namespace tensorscope::daemon
