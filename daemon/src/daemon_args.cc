// daemon_args.cc — see daemon_args.h.
#include "daemon_args.h"

#include <boost/program_options.hpp>

#include <limits>
#include <sstream>
#include <vector>

namespace tensorscope::daemon {
namespace {

namespace po = boost::program_options;

po::options_description described() {
  po::options_description o("Options");
  // clang-format off
  o.add_options()
      ("config", po::value<std::string>()->value_name("FILE"), "the daemon's config (YAML); without it, the defaults")
      ("output", po::value<std::string>()->value_name("DIR"), "where videos go: DIR/<session>/ (output_dir)")
      ("session", po::value<std::string>()->value_name("NAME"), "the session its clients name (session)")
      ("workers", po::value<std::string>()->value_name("N"), "worker processes (workers)")
      ("runtime-dir", po::value<std::string>()->value_name("DIR"), "sockets and segments (runtime_dir)")
      ("log-level", po::value<std::string>()->value_name("LEVEL"), "trace, debug, info, warn, error or off (log_level)")
      ("idle-exit-ms", po::value<std::string>()->value_name("MS"),
       "exit (finalizing every video) after MS ms without producers (supervisor.idle_exit_ms)")
      ("reference", po::value<std::string>()->value_name("RUN"),
       "compare each process's summaries with this run's as it trains: a session folder or a session name "
       "under DIR (reference.session)")
      ("view", "serve the live view (live.serve: true); its address is printed on stderr")
      ("check-config", "load and check the config (with these options), say so, and exit")
      ("detach", "(first argument) run the daemon in a child; return once it listens")
      ("autostarted", "mark the daemon as started by a client (tensorscope status)")
      ("help,h", "this text");
  // clang-format on
  return o;
}

// An int from `text` (at least `lo` when given), or an error naming `option`.
StatusOr<int> integer(const std::string& option, const std::string& text, std::optional<int> lo = std::nullopt) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= lo.value_or(std::numeric_limits<int>::min()) &&
        v <= std::numeric_limits<int>::max()) {
      return static_cast<int>(v);
    }
  } catch (const std::exception&) {}
  return Status::error("--" + option + ": expected an integer" + (lo ? " >= " + std::to_string(*lo) : "") + ", got '" +
                       text + "'");
}

}  // namespace

std::string daemon_usage() {
  std::ostringstream out;
  out << "usage: tensorscoped [--config FILE] [--output DIR] [--session NAME] [--workers N]\n"
         "                    [--runtime-dir DIR] [--log-level LEVEL] [--idle-exit-ms MS]\n"
         "                    [--reference RUN] [--view] [--check-config] [--detach] [--autostarted]\n"
         "Starts the tensorscope daemon in the foreground. Videos go to DIR/NAME/.\n"
      << described()
      << "Exit status: 0 stopped cleanly (or, with --detach, listening; with --check-config,\n"
         "the config is good), 1 could not start, 2 bad arguments or config, 3 a daemon\n"
         "already serves the session.\n";
  return out.str();
}

StatusOr<DaemonArgs> parse_daemon_args(int argc, const char* const* argv) {
  DaemonArgs args;
  if (argc == 3 && std::string(argv[1]) == "--worker-fd") {  // the supervisor's re-exec
    StatusOr<int> fd = integer("worker-fd", argv[2], 0);
    if (!fd) return fd.status();
    args.worker_fd = *fd;
    return args;
  }
  po::options_description all = described();
  all.add_options()("stray", po::value<std::vector<std::string>>());  // words that are no option
  po::positional_options_description stray;
  stray.add("stray", -1);
  po::variables_map given;
  try {
    const auto style = po::command_line_style::unix_style ^ po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(all).positional(stray).style(style).run(), given);
  } catch (const po::error& e) {
    return Status::error(e.what());
  }
  if (given.count("stray") != 0) {
    return Status::error("unknown argument '" + given["stray"].as<std::vector<std::string>>().front() + "'");
  }
  auto text = [&given](const char* name) -> std::optional<std::string> {
    if (given.count(name) == 0) return std::nullopt;
    return given[name].as<std::string>();
  };
  args.help = given.count("help") != 0;
  args.check_config = given.count("check-config") != 0;
  args.view = given.count("view") != 0;
  args.detach = given.count("detach") != 0;
  args.autostarted = given.count("autostarted") != 0;
  args.config_path = text("config").value_or("");
  args.output = text("output");
  args.session = text("session");
  args.runtime_dir = text("runtime-dir");
  args.reference = text("reference");
  if (const auto level = text("log-level")) {
    args.log_level = choice_from_name<LogLevel>(*level);
    if (!args.log_level) {
      std::string levels;
      for (const std::string_view name : kLogLevels) levels += (levels.empty() ? "" : ", ") + std::string(name);
      return Status::error("--log-level: expected one of " + levels + ", got '" + *level + "'");
    }
  }
  if (const auto workers = text("workers")) {
    StatusOr<int> n = integer("workers", *workers);  // its range: the config's rule
    if (!n) return n.status();
    args.workers = *n;
  }
  if (const auto idle = text("idle-exit-ms")) {
    StatusOr<int> ms = integer("idle-exit-ms", *idle, 0);
    if (!ms) return ms.status();
    args.idle_exit_ms = *ms;
  }
  return args;
}

StatusOr<DaemonConfig> daemon_config_for(const DaemonArgs& args) {
  StatusOr<DaemonConfig> loaded = args.config_path.empty() ? StatusOr<DaemonConfig>(DaemonConfig::defaults())
                                                           : load_daemon_config(args.config_path);
  if (!loaded) return loaded.status();
  DaemonConfig config = *loaded;
  if (args.output) config.output_dir = *args.output;
  if (args.session) config.session = *args.session;
  if (args.runtime_dir) config.runtime_dir = *args.runtime_dir;
  if (args.reference) config.reference.session = *args.reference;
  if (args.log_level) config.log_level = *args.log_level;
  if (args.workers) config.workers = *args.workers;
  if (args.idle_exit_ms) config.supervisor.idle_exit = std::chrono::milliseconds(*args.idle_exit_ms);
  if (args.view) config.live.serve = true;
  if (Status valid = validate_daemon_config(config); !valid) return valid;
  return config;
}

}  // namespace tensorscope::daemon
