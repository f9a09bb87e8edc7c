// tensorscoped — the tensorscope daemon.
//
//   tensorscoped --config FILE [--output DIR] [--session NAME] [--workers N]
//
// Runs in the foreground as the supervisor; re-executes itself with --worker-fd for each
// worker process. SIGINT/SIGTERM finalize every open video and exit 0.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "supervisor.h"
#include "worker.h"
#include "tensorscope/shared/daemon_config.h"
#include "tensorscope/shared/logging.h"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: tensorscoped --config FILE [--output DIR] [--session NAME] [--workers N]\n"
               "                    [--runtime-dir DIR] [--log-level LEVEL]\n"
               "Starts the tensorscope daemon in the foreground. Videos go to DIR/NAME/.\n");
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

}  // namespace

int main(int argc, char** argv) {
  using namespace tensorscope;
  if (argc == 3 && std::strcmp(argv[1], "--worker-fd") == 0) {
    int fd = -1;
    if (!parse_int(argv[2], &fd) || fd < 0) return 2;
    daemon::Worker worker(fd);
    return worker.run();
  }

  std::string config_path, output, session, runtime_dir, log_level;
  int workers = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tensorscoped: %s needs a value\n", name);
        std::exit(2);
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
        return 2;
      }
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "tensorscoped: unknown argument '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }

  auto loaded = config_path.empty() ? StatusOr<DaemonConfig>(DaemonConfig::defaults())
                                     : load_daemon_config(config_path);
  if (!loaded) {
    std::fprintf(stderr, "tensorscoped: %s\n", loaded.message().c_str());
    return 2;
  }
  DaemonConfig config = *loaded;
  if (!output.empty()) config.output_dir = output;
  if (!session.empty()) config.session = session;
  if (!runtime_dir.empty()) config.runtime_dir = runtime_dir;
  if (!log_level.empty()) config.log_level = log_level;
  if (workers != -1) config.workers = workers;
  Status valid = validate_daemon_config(config);
  if (!valid) {
    std::fprintf(stderr, "tensorscoped: %s\n", valid.message().c_str());
    return 2;
  }
  (void)init_logging(config.log_level, "supervisor");
  daemon::Supervisor supervisor(config, self_executable(argv[0]));
  return supervisor.run();
}
