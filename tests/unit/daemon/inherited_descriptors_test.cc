// close_inherited_descriptors: nothing from 3 up survives; stdin, stdout and stderr do.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "inherited_descriptors.h"

namespace tensorscope::daemon {
namespace {

TEST(InheritedDescriptors, EverythingFromThreeUpIsClosed) {
  const pid_t pid = ::fork();
  if (pid == 0) {  // a child: the test process keeps its own descriptors
    const int plain = ::open("/dev/null", O_RDONLY);
    const int high = ::fcntl(plain, F_DUPFD, 900);
    int pipe_fds[2];
    if (plain < 0 || high < 0 || ::pipe(pipe_fds) != 0) ::_exit(2);
    close_inherited_descriptors();
    for (int fd : {plain, high, pipe_fds[0], pipe_fds[1]}) {
      if (::fcntl(fd, F_GETFD) != -1) ::_exit(3);
    }
    for (int fd : {0, 1, 2}) {
      if (::fcntl(fd, F_GETFD) == -1) ::_exit(4);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: setup failed, 3: a descriptor survived, 4: stdio was closed";
}

}  // namespace
}  // namespace tensorscope::daemon
