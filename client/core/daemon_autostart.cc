#include "daemon_autostart.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "tensorscope/shared/daemon_exit_status.h"
#include "tensorscope/shared/file_lock.h"
#include "tensorscope/base/logging.h"
#include "tensorscope/base/posix_path.h"
#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/output_dir.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/base/text_input.h"
#include "tensorscope/base/posix_file.h"

extern char** environ;

namespace tensorscope {
namespace {

constexpr const char* kDaemonName = "tensorscoped";
constexpr int64_t kStillStartingMs = 60000;
constexpr int64_t kWaitForOtherMs = 5000;  // then launch anyway: the session lock arbitrates
constexpr int64_t kMinLaunchGapMs = 1000;  // between two launches of one client
constexpr int64_t kUnknownOutcomeRetryMs = 5000;

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string directory_of(const std::string& path) { return parent_path(resolved_path(path)); }

// The last non-empty line of the daemon's log (why it did not start), quoted.
std::string last_log_line(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return {};
  struct stat st {};
  std::string tail;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    const off_t start = st.st_size > 4096 ? st.st_size - 4096 : 0;
    tail.resize(static_cast<size_t>(st.st_size - start));
    const ssize_t n = ::pread(fd, tail.data(), tail.size(), start);
    tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  const size_t newline = tail.find_last_of('\n');
  return quote_for_message(newline == std::string::npos ? tail : tail.substr(newline + 1), 300);
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

DaemonSearch DaemonSearch::from_environment(const std::string& configured) {
  DaemonSearch search;
  search.configured = configured;
  if (const char* env = std::getenv("TENSORSCOPE_DAEMON"); env != nullptr && *env != '\0') search.env_daemon = env;
  if (const char* path = std::getenv("PATH"); path != nullptr) search.path = path;
  return search;
}

StatusOr<std::string> find_daemon_executable(const DaemonSearch& search) {
  const std::string& configured = search.configured;
  if (!configured.empty()) {
    if (is_executable_file(configured)) return configured;
    return Status::error("ClientOptions::daemon_executable " + quote_for_message(configured, 200) +
                         " is not an executable file");
  }
  if (search.env_daemon) {
    const std::string& env = *search.env_daemon;
    if (is_executable_file(env)) return env;
    return Status::error("TENSORSCOPE_DAEMON=" + quote_for_message(env, 200) + " is not an executable file");
  }
  std::vector<std::string> candidates;
  auto beside = [&](const std::string& file) {
    const std::string dir = directory_of(file);
    candidates.push_back(dir + "/" + kDaemonName);
    candidates.push_back(dir + "/../bin/" + kDaemonName);
  };
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&find_daemon_executable), &info) != 0 && info.dli_fname != nullptr &&
      info.dli_fname[0] != '\0') {
    beside(info.dli_fname);
  }
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) beside(std::string(self, static_cast<size_t>(n)));
#ifdef TENSORSCOPE_INSTALL_BINDIR
  candidates.push_back(std::string(TENSORSCOPE_INSTALL_BINDIR) + "/" + kDaemonName);
#endif
  {
    const std::string& dirs = search.path;
    size_t begin = 0;
    while (begin <= dirs.size()) {
      const size_t end = std::min(dirs.find(':', begin), dirs.size());
      if (end > begin) candidates.push_back(dirs.substr(begin, end - begin) + "/" + kDaemonName);
      begin = end + 1;
    }
  }
  std::string looked;
  for (const auto& c : candidates) {
    if (is_executable_file(c)) return resolved_path(c);
    if (looked.size() < 1500) looked += (looked.empty() ? "" : ", ") + c;
  }
  return Status::error("tensorscoped not found (looked at " + looked +
                       "); set TENSORSCOPE_DAEMON or ClientOptions::daemon_executable");
}

DaemonAutostart::DaemonAutostart(AutostartConfig config)
    : config_(std::move(config)), search_(DaemonSearch::from_environment(config_.executable)) {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) environment_.emplace_back(*e);
  // Relative to the working directory the program has now.
  if (config_.output_dir.empty()) config_.output_dir = kDefaultOutputDir;
  config_.output_dir = absolute_path(config_.output_dir);
  if (!config_.config_path.empty()) config_.config_path = absolute_path(config_.config_path);
}

DaemonAutostart::~DaemonAutostart() {
  // The launched process exits as soon as its daemon listens; reap it if it is about to.
  for (int i = 0; child_ > 0 && i < 20; ++i) {
    int status = 0;
    if (::waitpid(child_, &status, WNOHANG) != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  release_lock();
}

void DaemonAutostart::release_lock() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

void DaemonAutostart::on_connected(int64_t now_ms) {
  if (waiting_for_other_) state_ = "a daemon started by another process serves the session";
  // Ours listens, and its launcher is about to exit (0; or 3 if another daemon won the
  // session lock, which poll() still tells). Say so now: a busy machine can keep the
  // launcher's exit from being seen for a while after the first push.
  poll(now_ms);
  if (child_ > 0) state_ = started_state();
  waiting_for_other_ = false;
  waiting_since_ms_ = -1;
}

bool DaemonAutostart::step(int64_t now_ms) {
  if (given_up_) return false;
  if (child_ > 0) return check_child(now_ms);
  if (now_ms < next_try_ms_) return false;
  if (Status dir = ensure_private_dir(config_.runtime_dir); !dir) {
    fail(dir.message(), false, now_ms);
    return false;
  }
  // Ranks starting together: whoever holds the autostart lock launches; the others wait.
  const std::string lock_path = autostart_lock_path(config_.runtime_dir, config_.session);
  release_lock();
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd_ < 0) {
    fail("cannot open " + lock_path + ": " + errno_text(errno), false, now_ms);
    return false;
  }
  const int err = try_lock_file(lock_fd_);
  if (err != 0 && !lock_held_elsewhere(err)) {
    fail("cannot lock " + lock_path + ": " + errno_text(err), false, now_ms);
    return false;
  }
  if (err != 0) {
    release_lock();
    if (waiting_since_ms_ < 0) waiting_since_ms_ = now_ms;
    waiting_for_other_ = now_ms - waiting_since_ms_ < kWaitForOtherMs;
    if (waiting_for_other_) {
      state_ = "waiting for the daemon that another process is starting";
      return false;
    }
    // Still held after that long: its holder may be a forked child of a launcher that
    // moved on. Launch anyway; the daemon's own session lock keeps it to one.
  }
  waiting_for_other_ = false;
  waiting_since_ms_ = -1;
  // It may have come up while we took the lock.
  if (auto fd = connect_unix(session_socket_path(config_.runtime_dir, config_.session))) {
    ::close(*fd);
    release_lock();
    state_ = "a daemon started by another process serves the session";
    return true;
  }
  launch(now_ms);
  return false;
}

void DaemonAutostart::launch(int64_t now_ms) {
  if (!executable_) executable_ = find_daemon_executable(search_);
  const StatusOr<std::string>& executable = *executable_;
  if (!executable) return fail(executable.message(), true, now_ms);
  const std::string& output = config_.output_dir;
  const std::string session_dir = output + "/" + config_.session;
  if (Status made = make_directories(session_dir); !made) return fail(made.message(), false, now_ms);
  log_path_ = session_dir + "/tensorscoped.log";

  std::vector<std::string> args = {*executable,
                                   "--detach",
                                   "--autostarted",
                                   "--session",
                                   config_.session,
                                   "--runtime-dir",
                                   config_.runtime_dir,
                                   "--output",
                                   output,
                                   "--idle-exit-ms",
                                   std::to_string(config_.idle_exit_ms)};
  if (!config_.config_path.empty()) {
    args.push_back("--config");
    args.push_back(config_.config_path);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : environment_) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // nothing of the training process's
#endif
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM}) {
    sigaddset(&defaults, s);
  }
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return fail("cannot start " + *executable + ": " + errno_text(rc), false, now_ms);
  child_ = pid;
  launched_ms_ = now_ms;
  next_try_ms_ = now_ms + kMinLaunchGapMs;
  state_ = "starting " + *executable + " (log " + log_path_ + ")";
  TS_LOG_INFO("tensorscope client: no daemon for session '{}': starting {} (output {}, log {})", config_.session,
              *executable, output, log_path_);
}

bool DaemonAutostart::check_child(int64_t now_ms) {
  int status = 0;
  const pid_t r = ::waitpid(child_, &status, WNOHANG);
  if (r == 0) {
    if (now_ms - launched_ms_ > kStillStartingMs) {
      state_ = "tensorscoped has been starting for over a minute (log " + log_path_ + ")";
    }
    return false;
  }
  child_ = -1;
  release_lock();
  if (r < 0) {
    // Reaped by someone else (a SIGCHLD handler of the program): the outcome is unknown.
    // Look at the socket; launch again only after a while.
    ++failures_;  // counted: reset only by a launch known to have worked
    next_try_ms_ = now_ms + std::min<int64_t>(60000, kUnknownOutcomeRetryMs << std::min(failures_ - 1, 4));
    state_ = "launched tensorscoped; its exit status was collected elsewhere (log " + log_path_ + ")";
    return true;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kDaemonExitOk) {
    failures_ = 0;
    state_ = started_state();
    return true;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kDaemonExitAlreadyRunning) {
    state_ = "a daemon started by another process serves the session";
    return true;
  }
  const std::string line = last_log_line(log_path_);
  fail("tensorscoped " + describe_exit(status) + (line.empty() ? "" : ": " + line) + " (log " + log_path_ + ")",
       WIFEXITED(status) && WEXITSTATUS(status) == kDaemonExitBadUsage, now_ms);
  return false;
}

std::string DaemonAutostart::started_state() const { return "started tensorscoped (log " + log_path_ + ")"; }

void DaemonAutostart::fail(const std::string& why, bool final, int64_t now_ms) {
  release_lock();
  ++failures_;
  given_up_ = final;
  const int64_t delay = std::min<int64_t>(60000, int64_t{1000} << std::min(failures_, 6));
  next_try_ms_ = now_ms + delay;
  const std::string state =
      "autostart failed: " + why + (final ? "; not retried" : "; retrying in " + std::to_string(delay / 1000) + " s");
  TS_LOG_WARN("tensorscope client: {}", state);
  state_ = state;
}

}  // namespace tensorscope
