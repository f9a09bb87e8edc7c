// view_command.cc — `tensorscope view`: serves the live view of one or more sessions
// (tensorscope/view/view_server.h) until SIGINT or SIGTERM.
//
// The session directory comes from the session's running daemon (its status names it),
// else from --output (default tensorscope_runs, shared/output_dir.h) and --session; with
// neither --session nor --dir, the running daemon of session "default", else the session
// written last under --output (after a run: the run's). --dir names session
// directories directly, or a folder holding them (several: per-node daemons writing to
// shared storage; shared/output_dir.h's session_dirs_under). Prints the
// page's address, with its token, as the first line on stdout.
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"
#include "tensorscope/base/posix_path.h"
#include "tensorscope/shared/output_dir.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/session_name.h"
#include "tensorscope/shared/status_query.h"
#include "tensorscope/view/view_server.h"

namespace tensorscope::tools {
namespace {

void view_usage(FILE* out) {
  std::fprintf(out,
               "usage: tensorscope view [--session NAME] [--output DIR] [--dir SESSION_DIR]...\n"
               "                        [--runtime-dir DIR] [--address ADDR] [--allow-remote]\n"
               "                        [--port N] [--allow-host NAME]... [--history-mb N]\n"
               "Serves a page that shows every stream of the session while training runs (and\n"
               "its finished videos afterwards). Prints its address, with the token every\n"
               "request needs; open it in a browser (through `ssh -L PORT:127.0.0.1:PORT` from\n"
               "another machine). Runs until interrupted.\n"
               "  --session NAME      the session; its directory comes from its running daemon, else\n"
               "                      from --output (default %s). Without --session or --dir:\n"
               "                      a running daemon of session 'default', else the session\n"
               "                      written last under --output\n"
               "  --dir SESSION_DIR   show this session directory (repeat for several nodes'\n"
               "                      sessions side by side), or every session directory under\n"
               "                      it (a common parent of several nodes' sessions)\n"
               "  --address ADDR      listen there (default 127.0.0.1; another address needs\n"
               "                      --allow-remote)\n"
               "  --port N            TCP port (default: a free one)\n"
               "  --allow-host NAME   also answer to Host: NAME (a machine name, behind a proxy)\n"
               "  --history-mb N      frames kept for the step cursor (default 64)\n"
               "Exit status: 0 interrupted, 1 cannot serve, 2 bad usage.\n",
               kDefaultOutputDir);
}

bool parse_number(const char* text, long lo, long hi, long* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int run_view_command(int argc, char** argv) {
  std::string session, output = kDefaultOutputDir, runtime_dir;
  std::vector<std::string> dirs;
  view::ViewServerOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    long n = 0;
    if (arg == "--help" || arg == "-h") {
      view_usage(stdout);
      return 0;
    } else if (arg == "--allow-remote") {
      options.allow_remote = true;
    } else if (has_value && (arg == "--session" || arg == "--output" || arg == "--runtime-dir" || arg == "--address")) {
      (arg == "--session"           ? session
           : arg == "--output"      ? output
           : arg == "--runtime-dir" ? runtime_dir
                                    : options.bind_address) = argv[++i];
    } else if (has_value && arg == "--dir") {
      dirs.push_back(argv[++i]);
    } else if (has_value && arg == "--allow-host") {
      options.allowed_hosts.push_back(argv[++i]);
    } else if (has_value && arg == "--port") {
      if (!parse_number(argv[++i], 0, 65535, &n)) {
        std::fprintf(stderr, "tensorscope view: --port: expected 0 to 65535, got '%s'\n", argv[i]);
        return 2;
      }
      options.port = static_cast<int>(n);
    } else if (has_value && arg == "--history-mb") {
      if (!parse_number(argv[++i], 1, 65536, &n)) {
        std::fprintf(stderr, "tensorscope view: --history-mb: expected 1 to 65536, got '%s'\n", argv[i]);
        return 2;
      }
      options.history_bytes = static_cast<uint64_t>(n) << 20;
    } else {
      std::fprintf(stderr, "tensorscope view: unknown or incomplete argument '%s'\n", arg.c_str());
      view_usage(stderr);
      return 2;
    }
  }
  if (!dirs.empty() && !session.empty()) {
    std::fprintf(stderr, "tensorscope view: give --session or --dir, not both\n");
    return 2;
  }
  for (std::string given : dirs) {
    while (given.size() > 1 && given.back() == '/') given.pop_back();
    if (!is_directory(given)) {
      std::fprintf(stderr, "tensorscope view: %s is not a directory\n", given.c_str());
      return 1;
    }
    // A folder of session folders (many nodes' daemons under a common parent): each of them.
    std::vector<std::string> found = session_dirs_under(given);
    if (found.empty()) found = {given};  // (not written yet: shown as it fills)
    for (const std::string& d : found) {
      const std::string name = base_name(d);
      // A directory whose name is not a session name still shows its files (no live frames).
      const bool named = validate_session_name(name).is_ok();
      const std::string label = d == given ? name : d.substr(given.size() + 1);
      options.sources.push_back({d, named ? name : "", runtime_dir, label});
    }
  }
  if (dirs.empty() && session.empty()) {
    // The running daemon of session "default" (what no argument meant before), else the
    // session written last under --output (after a run: the run's).
    if (query_daemon_status(runtime_dir, "default", 3000)) {
      session = "default";
      std::fprintf(stderr,
                   "tensorscope view: the running daemon of session 'default' (--session or --dir for "
                   "another)\n");
    } else if (const std::string latest = latest_session_dir(output); !latest.empty()) {
      session = base_name(latest);
      std::fprintf(stderr, "tensorscope view: the latest session under %s: %s (--session or --dir for another)\n",
                   output.c_str(), session.c_str());
    } else {
      std::fprintf(stderr,
                   "tensorscope view: nothing to show: no daemon runs for session 'default' (runtime directory "
                   "%s) and no session directory is under %s (a daemon or a client's autostart writes "
                   "<output>/<session>/ in its working directory); give --session NAME, --output DIR or "
                   "--dir SESSION_DIR\n",
                   default_runtime_dir(runtime_dir).c_str(), absolute_path(output).c_str());
      return 1;
    }
  }
  if (dirs.empty()) {
    if (Status valid = validate_session_name(session); !valid) {
      std::fprintf(stderr, "tensorscope view: %s\n", valid.message().c_str());
      return 2;
    }
    std::string dir = output + "/" + session;
    auto status = query_daemon_status(runtime_dir, session, 3000);
    if (status && status->contains("output_dir") && (*status)["output_dir"].is_string()) {
      dir = (*status)["output_dir"].get<std::string>();
    } else if (!is_directory(dir)) {
      std::fprintf(stderr,
                   "tensorscope view: no daemon runs for session '%s' and %s does not exist "
                   "(give --output or --dir)\n",
                   session.c_str(), dir.c_str());
      return 1;
    }
    options.sources.push_back({dir, session, runtime_dir, ""});
  }

  // Signals are taken synchronously below; the server's threads inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto server = view::ViewServer::start(options);
  if (!server) {
    std::fprintf(stderr, "tensorscope view: %s\n", server.message().c_str());
    return 1;
  }
  std::printf("%s\n", (*server)->url().c_str());
  std::fflush(stdout);
  for (const auto& s : options.sources) {
    std::fprintf(stderr, "tensorscope view: showing %s%s\n", s.session_dir.c_str(),
                 s.session.empty() ? " (files only)" : "");
  }
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  (*server)->stop();
  return 0;
}

}  // namespace tensorscope::tools
