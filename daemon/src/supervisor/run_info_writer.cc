// run_info_writer.cc — see run_info_writer.h.
#include "supervisor/run_info_writer.h"

#include "tensorscope/base/clock.h"

#include "inherited_descriptors.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <opencv2/core/version.hpp>

#include "tensorscope/base/atomic_file.h"
#include "tensorscope/base/logging.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/base/subprocess.h"

#ifndef TENSORSCOPE_VERSION
#define TENSORSCOPE_VERSION "unknown"
#endif

extern char** environ;

namespace tensorscope::daemon {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxGitTextBytes = std::size_t{64} << 10;   // rev-parse answers
constexpr std::size_t kMaxGitStatusBytes = std::size_t{4} << 20;  // status --porcelain
constexpr std::size_t kMaxGitErrorBytes = 4096;                   // stderr kept
constexpr std::size_t kMaxLiveHelpers = 64;
constexpr char kGitLockName[] = ".git.lock";

std::string bounded_utf8(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

bool is_name(const std::string& key, std::size_t max_bytes, bool allow_dot_dash) {
  if (key.empty() || key.size() > max_bytes) return false;
  for (unsigned char c : key) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
        (allow_dot_dash && (c == '.' || c == '-'));
    if (!ok) return false;
  }
  return true;
}

void add_note(std::vector<std::string>* notes, const std::string& note) {
  if (notes == nullptr) return;
  if (notes->size() < kRunInfoMaxNotes) {
    notes->push_back(bounded_utf8(note, 256));
  } else if (notes->size() == kRunInfoMaxNotes) {
    notes->push_back("more notes left out");
  }
}

// A string field cut to `max_bytes` (noted when cut); nullopt (noted) when not a string.
bool take_string(const json& value, const std::string& key, std::size_t max_bytes, json* out,
                 std::vector<std::string>* notes) {
  if (!value.is_string()) {
    add_note(notes, "run_info." + key + " dropped: not a string");
    return false;
  }
  const auto& s = value.get_ref<const std::string&>();
  if (s.size() > max_bytes) add_note(notes, "run_info." + key + " cut to " + std::to_string(max_bytes) + " bytes");
  (*out)[key] = bounded_utf8(s, max_bytes);
  return true;
}

std::string iso8601_utc(int64_t unix_ms) {
  const time_t seconds = static_cast<time_t>(unix_ms / 1000);
  tm parts{};
  if (::gmtime_r(&seconds, &parts) == nullptr) return {};
  char text[64];
  const std::size_t n = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &parts);
  if (n == 0) return {};
  char millis[16];
  std::snprintf(millis, sizeof(millis), ".%03dZ", static_cast<int>(unix_ms % 1000));
  return std::string(text, n) + millis;
}

std::string hostname() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return {};
  return host;
}

// ---- running git ----

std::vector<std::string> git_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    // GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_CONFIG_* ... of the daemon's own
    // environment would point git elsewhere.
    if (std::strncmp(*e, "GIT_", 4) == 0 || std::strncmp(*e, "LC_ALL=", 7) == 0) continue;
    env.emplace_back(*e);
  }
  for (const char* extra :
       {"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "GIT_PAGER=cat", "GIT_ASKPASS=/bin/false", "LC_ALL=C"}) {
    env.emplace_back(extra);
  }
  return env;
}

// The result of one git command, or why it could not be started.
using GitRun = StatusOr<SubprocessResult>;

GitRun run_git(const GitOptions& options, const std::vector<std::string>& args, std::size_t max_out) {
  std::vector<std::string> argv = {options.git, "-c", "core.fsmonitor=false", "-c", "core.quotePath=false"};
  argv.insert(argv.end(), args.begin(), args.end());
  SubprocessOptions run;
  run.timeout_ms = options.timeout_ms;
  run.max_stdout_bytes = max_out;
  run.max_stderr_bytes = kMaxGitErrorBytes;
  run.env = git_environment();
  GitRun result = run_subprocess(argv, run);
  if (result.is_ok()) result->err = trim(bounded_utf8(result->err, kMaxGitErrorBytes));
  return result;
}

std::string describe_failure(const std::vector<std::string>& args, const GitRun& r, int timeout_ms) {
  std::string command = "git";
  for (const auto& a : args) command += " " + a;
  if (!r.is_ok()) return r.message();
  if (r->timed_out) return command + ": no answer in " + std::to_string(timeout_ms) + " ms (killed)";
  return command + ": exit code " + std::to_string(r->exit_code) + (r->err.empty() ? "" : ": " + r->err);
}

// ---- files ----

// <dir>/<name> replaced atomically by `text` (mode 0600).
Status write_atomically(const std::string& dir, const std::string& name, const std::string& text) {
  AtomicWriteOptions options;
  options.mode = 0600;
  return write_file_atomically(dir + "/" + name, text, {}, options);
}

Status ensure_run_info_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) return Status::ok();
  const int err = errno;
  struct stat st {};
  if (err == EEXIST && ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::ok();
  return Status::error("cannot create " + dir + ": " +
                       (err == EEXIST ? std::string("not a directory") : errno_text(err)));
}

// ---- helper processes ----

// pidfds of the helpers started by this process (readable once the helper exited).
std::vector<int>& live_helpers() {
  static std::vector<int> fds;
  return fds;
}

std::size_t count_live_helpers() {
  auto& fds = live_helpers();
  for (auto it = fds.begin(); it != fds.end();) {
    pollfd p{*it, POLLIN, 0};
    if (::poll(&p, 1, 0) != 0) {  // exited (or the pidfd broke): forget it
      ::close(*it);
      it = fds.erase(it);
    } else {
      ++it;
    }
  }
  return fds.size();
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

// The helper's work, in the forked child.
int run_helper(const std::string& session_dir, const std::string& base, const json& doc,
               const std::vector<std::string>& dirs, const GitOptions& options) {
  json pending = doc;
  pending["git"] = {{"pending", true}};
  Status first = write_run_info_files(session_dir, base, pending, nullptr);
  if (!first) {
    TS_LOG_ERROR("run_info: {}", first.message());
    return 1;
  }
  GitProbe git;
  if (dirs.empty()) {
    git.info = nullptr;
    git.notes.push_back("no working directory or executable to look for a git repository in");
  } else {
    // Helpers take turns: many ranks registering at once do not run git side by side.
    const std::string lock_path = session_dir + "/" + kRunInfoDirName + "/" + kGitLockName;
    const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock_fd >= 0) {
      while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {}
    }
    git = probe_git(dirs, options);
    if (lock_fd >= 0) ::close(lock_fd);
  }
  Status final_write = write_run_info_files(session_dir, base, doc, &git);
  if (!final_write) {
    TS_LOG_ERROR("run_info: {}", final_write.message());
    return 1;
  }
  return 0;
}

}  // namespace

json sanitize_run_info(const json& untrusted, std::vector<std::string>* notes) {
  json out = json::object();
  try {
    if (untrusted.is_null()) {
      add_note(notes, "the client sent no run_info");
      return out;
    }
    if (!untrusted.is_object()) {
      add_note(notes, "run_info dropped: not an object");
      return out;
    }
    for (const auto& [key, value] : untrusted.items()) {
      if (key == "argv") {
        if (!value.is_array()) {
          add_note(notes, "run_info.argv dropped: not an array");
          continue;
        }
        json argv = json::array();
        std::size_t bytes = 0;
        bool cut = false;
        for (const auto& arg : value) {
          if (!arg.is_string()) {
            cut = true;
            continue;
          }
          const auto& s = arg.get_ref<const std::string&>();
          if (argv.size() >= kRunInfoMaxArgs || bytes + s.size() > kRunInfoMaxArgvBytes) {
            const std::size_t room = kRunInfoMaxArgvBytes - std::min(bytes, kRunInfoMaxArgvBytes);
            if (argv.size() < kRunInfoMaxArgs && room > 0) argv.push_back(bounded_utf8(s, room));
            cut = true;
            break;
          }
          bytes += s.size();
          argv.push_back(s);
        }
        if (cut) {
          add_note(notes,
                   "run_info.argv cut (non-strings dropped, at most " + std::to_string(kRunInfoMaxArgs) +
                       " arguments and " + std::to_string(kRunInfoMaxArgvBytes) + " bytes)");
          out["argv_truncated"] = true;
        }
        out["argv"] = std::move(argv);
      } else if (key == "argv_truncated") {
        if (value.is_boolean()) {
          if (!out.contains("argv_truncated"))
            out["argv_truncated"] = value.get<bool>();
          else if (value.get<bool>())
            out["argv_truncated"] = true;
        } else {
          add_note(notes, "run_info.argv_truncated dropped: not a boolean");
        }
      } else if (key == "executable" || key == "cwd") {
        take_string(value, key, kRunInfoMaxPathBytes, &out, notes);
      } else if (key == "hostname") {
        take_string(value, key, kRunInfoMaxHostnameBytes, &out, notes);
      } else if (key == "pid" || key == "rank" || key == "collected_unix_ms") {
        if (value.is_number_integer()) {
          out[key] = value.get<int64_t>();
        } else {
          add_note(notes, "run_info." + key + " dropped: not an integer");
        }
      } else if (key == "env" || key == "versions") {
        const bool env = key == "env";
        if (!value.is_object()) {
          add_note(notes, "run_info." + key + " dropped: not an object");
          continue;
        }
        const std::size_t max_entries = env ? kRunInfoMaxEnvEntries : kRunInfoMaxVersions;
        const std::size_t max_value = env ? kRunInfoMaxEnvValueBytes : kRunInfoMaxVersionBytes;
        json kept = json::object();
        std::size_t dropped = 0;
        for (const auto& [name, v] : value.items()) {
          if (kept.size() >= max_entries || !is_name(name, env ? 128 : 64, !env) || !v.is_string()) {
            ++dropped;
            continue;
          }
          kept[name] = bounded_utf8(v.get_ref<const std::string&>(), max_value);
        }
        if (dropped > 0) {
          add_note(notes,
                   "run_info." + key + ": " + std::to_string(dropped) +
                       " entries dropped (bad name, not a string, or more than " + std::to_string(max_entries) + ")");
        }
        out[key] = std::move(kept);
      } else {
        add_note(notes, "run_info: unknown key '" + bounded_utf8(key, 64) + "' dropped");
      }
    }
  } catch (const std::exception& e) {
    add_note(notes, std::string("run_info could not be read: ") + e.what());
    return json::object();
  }
  return out;
}

json build_run_info(const json& untrusted, const RunInfoProducer& producer) {
  std::vector<std::string> notes;
  json client = sanitize_run_info(untrusted, &notes);
  const int64_t now_unix_ms = unix_time_ms();
  json doc = json::object();
  doc["format"] = 1;
  doc["session"] = producer.session;
  doc["producer_id"] = producer.producer_id;
  doc["pid"] = producer.pid;
  doc["rank"] = producer.rank;
  doc["registered_unix_ms"] = now_unix_ms;
  doc["registered_at"] = iso8601_utc(now_unix_ms);
  if (client.contains("pid")) {
    if (client["pid"].get<int64_t>() != producer.pid) doc["client_pid"] = client["pid"];
    client.erase("pid");
  }
  if (client.contains("rank")) {
    if (client["rank"].get<int64_t>() != producer.rank) doc["client_rank"] = client["rank"];
    client.erase("rank");
  }
  for (const char* key :
       {"hostname", "executable", "cwd", "argv", "argv_truncated", "env", "versions", "collected_unix_ms"}) {
    if (client.contains(key)) doc[key] = client[key];
  }
  if (!doc.contains("versions")) doc["versions"] = json::object();
  doc["daemon"] = {{"pid", static_cast<long>(::getpid())},
                   {"hostname", bounded_utf8(hostname(), kRunInfoMaxHostnameBytes)},
                   {"tensorscope", TENSORSCOPE_VERSION},
                   {"opencv", CV_VERSION}};
  doc["git"] = nullptr;
  doc["notes"] = notes;
  return doc;
}

std::vector<std::string> git_candidate_dirs(const json& run_info) {
  std::vector<std::string> dirs;
  auto absolute = [](const json& v) {
    return v.is_string() && !v.get_ref<const std::string&>().empty() && v.get_ref<const std::string&>()[0] == '/' &&
        v.get_ref<const std::string&>().find('\0') == std::string::npos;
  };
  if (!run_info.is_object()) return dirs;
  if (run_info.contains("cwd") && absolute(run_info["cwd"])) dirs.push_back(run_info["cwd"].get<std::string>());
  if (run_info.contains("executable") && absolute(run_info["executable"])) {
    std::string exe = run_info["executable"].get<std::string>();
    const std::size_t slash = exe.find_last_of('/');
    std::string dir = slash == 0 ? "/" : exe.substr(0, slash);
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  return dirs;
}

GitProbe probe_git(const std::vector<std::string>& dirs, const GitOptions& options) {
  GitProbe probe;
  probe.info = nullptr;
  try {
    for (const auto& dir : dirs) {
      struct stat st {};
      if (dir.empty() || dir[0] != '/' || ::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        probe.notes.push_back("git: " + bounded_utf8(dir, 256) + " is not a directory here");
        continue;
      }
      if (st.st_uid != ::geteuid()) {
        // git would read that directory's repository configuration (which can name
        // programs to run) as our user: only our own directories are looked at.
        probe.notes.push_back("git: " + bounded_utf8(dir, 256) + " is not owned by uid " + std::to_string(::geteuid()) +
                              "; git not run there");
        continue;
      }
      const std::vector<std::string> top_args = {"-C", dir, "rev-parse", "--show-toplevel"};
      GitRun top = run_git(options, top_args, kMaxGitTextBytes);
      if (!top.is_ok() || top->timed_out) {
        probe.info = {{"error", describe_failure(top_args, top, options.timeout_ms)}};
        return probe;
      }
      const std::string toplevel = trim(top->out);
      if (top->exit_code != 0 || toplevel.empty()) {
        probe.notes.push_back("git: " + bounded_utf8(dir, 256) + " is not in a git work tree");
        continue;
      }
      json info = {{"dir", dir}, {"toplevel", toplevel}};
      auto failed = [&](const std::vector<std::string>& args, const GitRun& r) {
        probe.info = {{"error", describe_failure(args, r, options.timeout_ms)}, {"dir", dir}, {"toplevel", toplevel}};
        return probe;
      };
      const std::vector<std::string> head_args = {"-C", toplevel, "rev-parse", "--verify", "-q", "HEAD"};
      GitRun head = run_git(options, head_args, kMaxGitTextBytes);
      if (!head.is_ok() || head->timed_out) return failed(head_args, head);
      const bool has_commit = head->exit_code == 0 && !trim(head->out).empty();
      info["commit"] = has_commit ? json(trim(head->out)) : json(nullptr);

      const std::vector<std::string> branch_args = {"-C", toplevel, "rev-parse", "--abbrev-ref", "HEAD"};
      GitRun branch = run_git(options, branch_args, kMaxGitTextBytes);
      if (!branch.is_ok() || branch->timed_out) return failed(branch_args, branch);
      const std::string branch_name = branch->exit_code == 0 ? trim(branch->out) : std::string();
      info["detached"] = branch_name == "HEAD";
      info["branch"] = branch_name.empty() || branch_name == "HEAD" ? json(nullptr) : json(branch_name);

      const std::vector<std::string> status_args = {"-C", toplevel, "status", "--porcelain"};
      GitRun status = run_git(options, status_args, kMaxGitStatusBytes);
      if (!status.is_ok() || status->timed_out || (status->exit_code != 0 && !status->truncated)) {
        return failed(status_args, status);
      }
      int64_t changed = 0, untracked = 0;
      std::size_t start = 0;
      while (start < status->out.size()) {
        std::size_t end = status->out.find('\n', start);
        if (end == std::string::npos) end = status->out.size();
        if (end > start) (status->out.compare(start, 3, "?? ") == 0 ? untracked : changed) += 1;
        start = end + 1;
      }
      info["dirty"] = !status->out.empty();
      info["changed_files"] = changed;
      info["untracked_files"] = untracked;
      if (status->truncated) info["status_truncated"] = true;

      info["patch"] = nullptr;
      info["patch_bytes"] = 0;
      info["patch_truncated"] = false;
      if (has_commit && changed > 0) {
        const std::vector<std::string> diff_args = {"-C",
                                                    toplevel,
                                                    "diff",
                                                    "HEAD",
                                                    "--binary",
                                                    "--no-color",
                                                    "--no-ext-diff",
                                                    "--no-textconv",
                                                    "--no-relative",
                                                    "--src-prefix=a/",
                                                    "--dst-prefix=b/"};
        GitRun diff = run_git(options, diff_args, options.max_patch_bytes);
        if (!diff.is_ok() || diff->timed_out || (diff->exit_code != 0 && !diff->truncated)) {
          info["patch_error"] = describe_failure(diff_args, diff, options.timeout_ms);
        } else {
          probe.patch = std::move(diff->out);
          info["patch_bytes"] = probe.patch.size();
          info["patch_truncated"] = diff->truncated;
          if (diff->truncated) {
            probe.notes.push_back("git: the diff is larger than " + std::to_string(options.max_patch_bytes) +
                                  " bytes; the patch is cut there and does not apply");
          }
        }
      }
      probe.info = std::move(info);
      return probe;
    }
  } catch (const std::exception& e) {
    probe.info = {{"error", std::string("git probe failed: ") + e.what()}};
  }
  return probe;
}

Status write_run_info_files(const std::string& session_dir, const std::string& base, json doc, const GitProbe* git) {
  const std::string dir = session_dir + "/" + kRunInfoDirName;
  Status made = ensure_run_info_dir(dir);
  if (!made) return made;
  try {
    if (git != nullptr) {
      doc["git"] = git->info;
      if (!doc.contains("notes") || !doc["notes"].is_array()) doc["notes"] = json::array();
      for (const auto& note : git->notes) doc["notes"].push_back(note);
      const std::string patch_name = base + ".patch";
      if (!git->patch.empty() && doc["git"].is_object()) {
        Status patch = write_atomically(dir, patch_name, git->patch);
        if (patch) {
          doc["git"]["patch"] = patch_name;
        } else {
          doc["git"]["patch_error"] = patch.message();
        }
      } else {
        ::unlink((dir + "/" + patch_name).c_str());  // from an earlier registration of this pid
      }
    }
    const std::string text = doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
    return write_atomically(dir, base + ".json", text);
  } catch (const std::exception& e) {
    return Status::error(std::string("run_info: ") + e.what());
  }
}

pid_t record_run_info(const std::string& session_dir, const json& untrusted, const RunInfoProducer& producer,
                      const GitOptions& options) noexcept {
  try {
    const json doc = build_run_info(untrusted, producer);
    const std::string base = run_info_base_name(producer.rank, producer.pid);
    const std::vector<std::string> dirs = git_candidate_dirs(doc);
    std::string inline_reason;
    if (count_live_helpers() >= kMaxLiveHelpers) {
      inline_reason = "git not run: " + std::to_string(kMaxLiveHelpers) + " run_info helpers are busy";
    } else {
      const pid_t pid = ::fork();
      if (pid == 0) {
        // The helper: a child of the single-threaded supervisor. It keeps none of the
        // supervisor's descriptors (sockets, segments), so no peer waits on it.
        close_inherited_descriptors();
        struct sigaction sa {};
        sa.sa_handler = SIG_DFL;
        for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) ::sigaction(s, &sa, nullptr);
        sigset_t empty;
        sigemptyset(&empty);
        ::sigprocmask(SIG_SETMASK, &empty, nullptr);
        ::prctl(PR_SET_NAME, "ts-run-info", 0, 0, 0);
        int code = 1;
        try {
          code = run_helper(session_dir, base, doc, dirs, options);
        } catch (...) {}
        ::_exit(code);
      }
      if (pid > 0) {
        const int pidfd = open_pidfd(pid);
        if (pidfd >= 0) live_helpers().push_back(pidfd);
        return pid;
      }
      inline_reason = "git not run: fork failed: " + errno_text(errno);
    }
    GitProbe none;
    none.info = {{"error", inline_reason}};
    Status written = write_run_info_files(session_dir, base, doc, &none);
    if (!written) TS_LOG_ERROR("run_info: {}", written.message());
    TS_LOG_WARN("run_info for producer {}: {}", producer.producer_id, inline_reason);
  } catch (const std::exception& e) {
    TS_LOG_ERROR("run_info for producer {}: {}", producer.producer_id, e.what());
  } catch (...) {
    TS_LOG_ERROR("run_info for producer {}: unknown error", producer.producer_id);
  }
  return -1;
}

}  // namespace tensorscope::daemon
