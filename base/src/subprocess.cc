// subprocess.cc — see subprocess.h.
#include "tensorscope/base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>

#include "tensorscope/base/posix_file.h"

extern char** environ;

namespace tensorscope {
namespace {

// The char* array that exec takes, over `strings` (which must outlive it).
std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

StatusOr<SubprocessResult> run_subprocess(const std::vector<std::string>& argv_in, const SubprocessOptions& options) {
  if (argv_in.empty()) return Status::error("run_subprocess: no program given");
  std::vector<std::string> argv_storage = argv_in;
  const std::vector<char*> argv = c_strings(argv_storage);
  std::vector<std::string> env_storage = options.env.value_or(std::vector<std::string>{});
  const std::vector<char*> env = c_strings(env_storage);
  char* const* envp = options.env.has_value() ? env.data() : environ;

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return Status::error("pipe: " + errno_text(err));
  }
  UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]);
  UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), 2);
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGHUP}) sigaddset(&defaults, s);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a timeout kills whatever it started
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  out_write.reset();
  err_write.reset();
  if (rc != 0) return Status::error("cannot run " + argv_in[0] + ": " + errno_text(rc));

  SubprocessResult result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
  bool out_open = true, err_open = true, killed = false;
  char buffer[65536];
  while (out_open || err_open) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      killed = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_read.get() : -1, POLLIN, 0}, {err_open ? err_read.get() : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      killed = true;
      break;
    }
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::read(out_read.get(), buffer, sizeof(buffer));
      if (n > 0) {
        const std::size_t room = options.max_stdout_bytes - result.out.size();
        result.out.append(buffer, std::min(room, static_cast<std::size_t>(n)));
        if (static_cast<std::size_t>(n) > room) {
          result.truncated = true;
          killed = true;
          break;
        }
      } else if (n == 0 || errno != EINTR) {
        out_open = false;
      }
    }
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::read(err_read.get(), buffer, sizeof(buffer));
      if (n > 0) {
        if (result.err.size() < options.max_stderr_bytes) {
          result.err.append(buffer,
                            std::min(options.max_stderr_bytes - result.err.size(), static_cast<std::size_t>(n)));
        }
      } else if (n == 0 || errno != EINTR) {
        err_open = false;
      }
    }
  }
  out_read.reset();
  err_read.reset();
  if (killed) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited == pid && WIFEXITED(status) && !killed) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace tensorscope
