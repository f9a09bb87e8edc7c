// tensorscoped — the tensorscope daemon.
//
//   tensorscoped --config FILE [--output DIR] [--session NAME] [--workers N]
//
// Runs in the foreground as the supervisor; re-executes itself with --worker-fd for each
// worker process. SIGINT/SIGTERM finalize every open video and exit 0.
// --detach (used by the client's autostart): the daemon runs in a child process; this one
// exits 0 once the daemon listens, or with the daemon's exit status when it cannot start.
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "inherited_descriptors.h"
#include "live_view.h"
#include "supervisor/supervisor.h"
#include "supervisor/worker_launcher.h"
#include "worker/worker.h"
#include "tensorscope/shared/sigbus_guard.h"
#include "config/daemon_config.h"
#include "tensorscope/shared/daemon_exit_status.h"
#include "tensorscope/base/logging.h"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: tensorscoped --config FILE [--output DIR] [--session NAME] [--workers N]\n"
               "                    [--runtime-dir DIR] [--log-level LEVEL] [--idle-exit-ms MS]\n"
               "                    [--view] [--detach] [--autostarted]\n"
               "Starts the tensorscope daemon in the foreground. Videos go to DIR/NAME/.\n"
               "  --idle-exit-ms MS  exit (finalizing every video) after MS ms without producers\n"
               "  --view             serve the live view (as live.serve: true); its address is\n"
               "                     printed on stderr\n"
               "  --detach           (first argument) run the daemon in a child; return once it\n"
               "                     listens\n"
               "  --autostarted      mark the daemon as started by a client (tensorscope status)\n"
               "Exit status: 0 stopped cleanly (or, with --detach, listening), 1 could not start,\n"
               "2 bad arguments or config, 3 a daemon already serves the session.\n");
}

std::string self_executable(const char* argv0) {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n > 0) return std::string(buffer, static_cast<size_t>(n));
  return argv0;
}

bool parse_int(const char* text, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

// --detach: forks; the child becomes the daemon and tells the parent through `*ready_fd`
// once it listens. The parent never returns: it exits with 0 then, or with the child's
// status when the child exits first.
void detach(int* ready_fd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("tensorscoped: pipe");
    std::exit(tensorscope::kDaemonExitStartFailed);
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("tensorscoped: fork");
    std::exit(tensorscope::kDaemonExitStartFailed);
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
  if (::poll(&p, 1, 10 * 60 * 1000) <= 0) ::_exit(tensorscope::kDaemonExitStartFailed);
  if (::read(fds[0], &byte, 1) == 1 && byte == 'R') ::_exit(0);
  int status = 0;  // no word and the pipe closed: the daemon is exiting
  if (::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  ::_exit(tensorscope::kDaemonExitStartFailed);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tensorscope;
  // A producer's segment truncated under a mapping reads as zeros instead of killing us.
  install_sigbus_guard();
  // --detach comes first (as the client's autostart passes it): the training process that
  // started us may have left descriptors open without close-on-exec.
  if (argc > 1 && std::strcmp(argv[1], "--detach") == 0) daemon::close_inherited_descriptors();
  if (argc == 3 && std::strcmp(argv[1], "--worker-fd") == 0) {
    int fd = -1;
    if (!parse_int(argv[2], &fd) || fd < 0) return 2;
    daemon::Worker worker(fd);
    return worker.run();
  }

  std::string config_path, output, session, runtime_dir, log_level;
  int workers = -1;
  int idle_exit_ms = -1;
  bool detached = false;
  bool view = false;
  daemon::StartMode mode;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tensorscoped: %s needs a value\n", name);
        std::exit(kDaemonExitBadUsage);
      }
      return argv[++i];
    };
    if (arg == "--config") {
      config_path = value("--config");
    } else if (arg == "--output") {
      output = value("--output");
    } else if (arg == "--session") {
      session = value("--session");
    } else if (arg == "--runtime-dir") {
      runtime_dir = value("--runtime-dir");
    } else if (arg == "--log-level") {
      log_level = value("--log-level");
    } else if (arg == "--workers") {
      if (!parse_int(value("--workers"), &workers)) {
        std::fprintf(stderr, "tensorscoped: --workers: expected an integer, got '%s'\n", argv[i]);
        return kDaemonExitBadUsage;
      }
    } else if (arg == "--idle-exit-ms") {
      if (!parse_int(value("--idle-exit-ms"), &idle_exit_ms) || idle_exit_ms < 0) {
        std::fprintf(stderr, "tensorscoped: --idle-exit-ms: expected an integer >= 0, got '%s'\n", argv[i]);
        return kDaemonExitBadUsage;
      }
    } else if (arg == "--view") {
      view = true;
    } else if (arg == "--detach") {
      detached = true;
    } else if (arg == "--autostarted") {
      mode.autostarted = true;
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "tensorscoped: unknown argument '%s'\n", arg.c_str());
      usage(stderr);
      return kDaemonExitBadUsage;
    }
  }

  auto loaded = config_path.empty() ? StatusOr<DaemonConfig>(DaemonConfig::defaults())
                                     : load_daemon_config(config_path);
  if (!loaded) {
    std::fprintf(stderr, "tensorscoped: %s\n", loaded.message().c_str());
    return kDaemonExitBadUsage;
  }
  DaemonConfig config = *loaded;
  if (!output.empty()) config.output_dir = output;
  if (!session.empty()) config.session = session;
  if (!runtime_dir.empty()) config.runtime_dir = runtime_dir;
  if (!log_level.empty()) config.log_level = log_level;
  if (workers != -1) config.workers = workers;
  if (idle_exit_ms != -1) config.supervisor.idle_exit_ms = idle_exit_ms;
  if (view) config.live.serve = "true";
  Status valid = validate_daemon_config(config);
  if (!valid) {
    std::fprintf(stderr, "tensorscoped: %s\n", valid.message().c_str());
    return kDaemonExitBadUsage;
  }
  if (detached) detach(&mode.ready_fd);
  (void)init_logging(config.log_level, "supervisor");
  // The live view starts once the session is ours (a second daemon of the session exits
  // before); one that cannot start is said in the log, and the videos go on.
  std::unique_ptr<view::ViewServer> live_view;
  mode.on_started = [&config, &live_view] {
    auto started = daemon::start_live_view(config);
    if (!started) {
      TS_LOG_ERROR("no live view: {}", started.message());
      return;
    }
    live_view = std::move(*started);
  };
  daemon::Supervisor supervisor(
      config, std::make_unique<daemon::ForkExecLauncher>(self_executable(argv[0])), mode);
  const int status = supervisor.run();
  if (live_view) live_view->stop();
  return status;
}
