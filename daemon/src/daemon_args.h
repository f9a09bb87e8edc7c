// daemon_args.h — tensorscoped's command line: what it asks for, parsed (Boost's
// program_options), and the overrides it makes to the loaded config.
//
// Used by daemon_main.cc only. Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "config/daemon_config.h"
#include "tensorscope/base/status.h"

namespace tensorscope::daemon {

struct DaemonArgs {
  std::optional<int> worker_fd;  // --worker-fd N: this process is a worker (internal)
  bool help = false;
  bool check_config = false;  // load and check the config (with the overrides), then exit
  std::string config_path;    // "" = the defaults (configs/default.yaml)
  // Overrides of config keys; unset: the config's value.
  std::optional<std::string> output;
  std::optional<std::string> session;
  std::optional<std::string> runtime_dir;
  std::optional<std::string> reference;
  std::optional<LogLevel> log_level;
  std::optional<int> workers;
  std::optional<int> idle_exit_ms;
  bool view = false;
  bool detach = false;
  bool autostarted = false;
};

// The arguments after argv[0]; an error names the argument and what it wanted
// ("--workers: expected an integer, got 'x'", "unknown argument '--fast'").
StatusOr<DaemonArgs> parse_daemon_args(int argc, const char* const* argv);

// The usage text (for --help, and after an error).
std::string daemon_usage();

// The config the arguments ask for: the file (or the defaults), the overrides applied,
// checked. Errors are the config's ("<file>: video.width: expected ... (line 3, column 10)").
StatusOr<DaemonConfig> daemon_config_for(const DaemonArgs& args);

}  // namespace tensorscope::daemon
