// tensorscoped — the tensorscope daemon.
//
//   tensorscoped [--config FILE] [--output DIR] [--session NAME] [--workers N] ...
//
// Runs in the foreground as the supervisor; re-executes itself with --worker-fd for each
// worker process. SIGINT/SIGTERM finalize every open video and exit 0.
// --detach (used by the client's autostart): the daemon runs in a child process; this one
// exits 0 once the daemon listens, or with the daemon's exit status when it cannot start.
// The arguments: daemon_args.h; --help lists them.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "daemon_args.h"
#include "inherited_descriptors.h"
#include "live_view.h"
#include "process_start.h"
#include "supervisor/supervisor.h"
#include "supervisor/worker_launcher.h"
#include "tensorscope/base/logging.h"
#include "tensorscope/shared/daemon_exit_status.h"
#include "tensorscope/shared/sigbus_guard.h"
#include "worker/worker.h"

int main(int argc, char** argv) {
  using namespace tensorscope;
  // A producer's segment truncated under a mapping reads as zeros instead of killing us.
  install_sigbus_guard();
  // --detach comes first (as the client's autostart passes it): the training process that
  // started us may have left descriptors open without close-on-exec.
  if (argc > 1 && std::strcmp(argv[1], "--detach") == 0) daemon::close_inherited_descriptors();
  StatusOr<daemon::DaemonArgs> args = daemon::parse_daemon_args(argc, argv);
  if (!args) {
    std::fprintf(stderr, "tensorscoped: %s (tensorscoped --help lists the options)\n", args.message().c_str());
    return kDaemonExitBadUsage;
  }
  if (args->worker_fd) return daemon::Worker(*args->worker_fd).run();
  if (args->help) {
    std::fputs(daemon::daemon_usage().c_str(), stdout);
    return 0;
  }
  StatusOr<DaemonConfig> loaded = daemon::daemon_config_for(*args);
  if (!loaded) {
    std::fprintf(stderr, "tensorscoped: %s\n", loaded.message().c_str());
    return kDaemonExitBadUsage;
  }
  const DaemonConfig config = *loaded;
  if (args->check_config) {
    std::printf("tensorscoped: %s: the config is good\n",
                args->config_path.empty() ? "the defaults" : args->config_path.c_str());
    return 0;
  }
  daemon::StartMode mode;
  mode.autostarted = args->autostarted;
  if (args->detach) daemon::detach(&mode.ready_fd);
  (void)init_logging(std::string(choice_name(config.log_level)), "supervisor");
  // The live view starts once the session is ours (a second daemon of the session exits
  // before); one that cannot start is said in the log, and the videos go on.
  std::unique_ptr<view::ViewServer> live_view;
  mode.on_started = [&config, &live_view]() -> std::string {
    auto started = daemon::start_live_view(config);
    if (!started) {
      TS_LOG_ERROR("no live view: {}", started.message());
      return "";
    }
    live_view = std::move(*started);
    return live_view ? live_view->url() : "";
  };
  daemon::Supervisor supervisor(config, std::make_unique<daemon::ForkExecLauncher>(daemon::self_executable(argv[0])),
                                mode);
  const int status = supervisor.run();
  if (live_view) live_view->stop();
  return status;
}
