// daemon_process.cc — see daemon_process.h.
#include "daemon_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/runtime_paths.h"

extern char** environ;

namespace tensorscope::itest {

std::string ExitInfo::describe() const {
  if (exited) return "exit code " + std::to_string(code);
  if (signal != 0) return std::string("killed by signal ") + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
  return "still running";
}

bool wait_until(const std::function<bool()>& condition, Millis timeout, Millis period) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(period);  // polling period, not synchronization
  }
}

// ---- ChildProcess ----

std::unique_ptr<ChildProcess> ChildProcess::start(const Options& options, std::string* error) {
  // The test process ignores SIGPIPE (writes to a producer that exited must not kill it).
  ::signal(SIGPIPE, SIG_IGN);
  if (options.argv.empty()) {
    *error = "empty argv";
    return nullptr;
  }
  // Everything the child needs is prepared before fork(): after it, only
  // async-signal-safe calls.
  std::vector<char*> argv;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& extra : options.env) {
      if (extra.substr(0, extra.find('=')) == key) overridden = true;
    }
    if (!overridden) env_storage.push_back(entry);
  }
  for (const auto& extra : options.env) env_storage.push_back(extra);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  const int err_fd = ::open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (err_fd < 0) {
    *error = "cannot open " + options.stderr_path + ": " + std::strerror(errno);
    return nullptr;
  }
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1};
  if ((options.pipe_stdin && ::pipe2(in_pipe, O_CLOEXEC) != 0) ||
      (options.pipe_stdout && ::pipe2(out_pipe, O_CLOEXEC) != 0)) {
    *error = std::string("pipe: ") + std::strerror(errno);
    for (int fd : {err_fd, null_fd, in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return nullptr;
  }
  const pid_t parent = ::getpid();
  sigset_t empty;
  sigemptyset(&empty);
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    for (int fd : {err_fd, null_fd, in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return nullptr;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // Dies with the test process (the supervisor's workers then see EOF and exit).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    ::dup2(options.pipe_stdin ? in_pipe[0] : null_fd, 0);
    ::dup2(options.pipe_stdout ? out_pipe[1] : err_fd, 1);
    ::dup2(err_fd, 2);
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) ::sigaction(s, &sa, nullptr);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    const char msg[] = "itest: execve failed\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that kill(-pid) works at once (EACCES after exec is fine)
  ::close(err_fd);
  if (null_fd >= 0) ::close(null_fd);
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->name_ = options.argv[0].substr(options.argv[0].find_last_of('/') + 1);
  child->stderr_path_ = options.stderr_path;
  if (options.pipe_stdin) {
    ::close(in_pipe[0]);
    child->stdin_fd_ = in_pipe[1];
  }
  if (options.pipe_stdout) {
    ::close(out_pipe[1]);
    child->stdout_fd_ = out_pipe[0];
    ::fcntl(child->stdout_fd_, F_SETFL, ::fcntl(child->stdout_fd_, F_GETFL) | O_NONBLOCK);
  }
  return child;
}

ChildProcess::~ChildProcess() {
  kill_group();
  close_stdin();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

bool ChildProcess::reap(int flags) {
  if (exit_) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, flags);
  } while (r < 0 && errno == EINTR);
  if (r != pid_) return false;
  ExitInfo info;
  if (WIFEXITED(status)) {
    info.exited = true;
    info.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    info.signal = WTERMSIG(status);
  }
  exit_ = info;
  return true;
}

bool ChildProcess::send_signal(int signo) {
  if (exit_ || pid_ <= 0) return false;
  return ::kill(pid_, signo) == 0;
}

bool ChildProcess::running() { return !reap(WNOHANG); }

std::optional<ExitInfo> ChildProcess::wait_exit(Millis timeout) {
  wait_until(
      [&] {
        pump_stdout();  // keep a chatty child from blocking on a full pipe
        return reap(WNOHANG);
      },
      timeout, Millis(5));
  return exit_;
}

void ChildProcess::kill_group() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);  // the group: the child and whatever it forked (ESRCH when empty)
  if (!exit_) {
    ::kill(pid_, SIGKILL);
    reap(0);
  }
}

bool ChildProcess::write_stdin(const std::string& text) {
  if (stdin_fd_ < 0) return false;
  return ::write(stdin_fd_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

void ChildProcess::close_stdin() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

void ChildProcess::pump_stdout() {
  if (stdout_fd_ < 0 || stdout_eof_) return;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(stdout_fd_, buffer, sizeof(buffer));
    if (n > 0) {
      partial_.append(buffer, static_cast<size_t>(n));
      size_t nl;
      while ((nl = partial_.find('\n')) != std::string::npos) {
        lines_.push_back(partial_.substr(0, nl));
        partial_.erase(0, nl + 1);
      }
      continue;
    }
    if (n == 0) {
      stdout_eof_ = true;
      if (!partial_.empty()) lines_.push_back(partial_);
      partial_.clear();
    }
    return;  // EAGAIN, EOF or error
  }
}

std::optional<std::string> ChildProcess::next_line(Millis timeout) {
  const size_t have = lines_.size();
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    pump_stdout();
    if (lines_.size() > have) return lines_[have];
    if (stdout_eof_ || stdout_fd_ < 0) return std::nullopt;
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{stdout_fd_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
  }
}

std::optional<std::string> ChildProcess::wait_for_line(const std::function<bool(const std::string&)>& predicate,
                                                       Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  size_t checked = 0;
  for (;;) {
    pump_stdout();
    for (; checked < lines_.size(); ++checked) {
      if (predicate(lines_[checked])) return lines_[checked];
    }
    if (stdout_eof_ || stdout_fd_ < 0) return std::nullopt;
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{stdout_fd_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
  }
}

std::string ChildProcess::stderr_text() const {
  std::ifstream in(stderr_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult run_command(const std::vector<std::string>& argv, const std::string& log_dir, Millis timeout) {
  static int counter = 0;
  CommandResult result;
  ChildProcess::Options options;
  options.argv = argv;
  options.stderr_path = log_dir + "/command-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".err";
  options.pipe_stdout = true;
  std::string error;
  auto child = ChildProcess::start(options, &error);
  if (!child) {
    result.err = error;
    return result;
  }
  auto exit = child->wait_exit(timeout);
  child->pump_stdout();
  for (const auto& line : child->all_lines()) result.out += line + "\n";
  result.err = child->stderr_text();
  if (!exit) {
    result.timed_out = true;
    child->kill_group();
    return result;
  }
  result.exit = *exit;
  return result;
}

// ---- status and files ----

StatusOr<nlohmann::json> request_reply(const std::string& socket_path, const nlohmann::json& request, int timeout_ms) {
  auto fd = connect_unix(socket_path);
  if (!fd) return fd.status();
  MessageChannel channel(*fd);
  Status sent = channel.send(request, -1, timeout_ms);
  if (!sent) return sent;
  return channel.receive(timeout_ms);
}

StatusOr<nlohmann::json> query_status(const std::string& socket_path, int timeout_ms) {
  auto reply = request_reply(socket_path, {{"type", "status"}}, timeout_ms);
  if (!reply) return reply;
  if (!reply->is_object() || reply->value("type", "") != "status") {
    return Status::error("unexpected status reply: " + reply->dump());
  }
  return reply;
}

StatusOr<std::vector<nlohmann::json>> read_index(const std::string& session_dir) {
  const std::string path = session_dir + "/index.json";
  std::ifstream in(path);
  if (!in) return std::vector<nlohmann::json>{};
  std::stringstream ss;
  ss << in.rdbuf();
  const auto doc = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("files") || !doc["files"].is_array()) {
    return Status::error(path + " is not an index: " + ss.str());
  }
  std::vector<nlohmann::json> files;
  for (const auto& f : doc["files"]) files.push_back(f);
  return files;
}

std::vector<std::string> list_dir(const std::string& dir, const std::function<bool(const std::string&)>& predicate) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (predicate(name)) out.push_back(name);
  }
  ::closedir(d);
  return out;
}

nlohmann::json parse_json_line(const std::string& line) {
  return nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
}

nlohmann::json wait_json_line(ChildProcess& child, const std::function<bool(const nlohmann::json&)>& predicate,
                              Millis timeout) {
  auto line = child.wait_for_line(
      [&](const std::string& l) {
        const nlohmann::json j = parse_json_line(l);
        return j.is_object() && predicate(j);
      },
      timeout);
  if (!line) return nullptr;
  return parse_json_line(*line);
}

// ---- DaemonProcess ----

std::unique_ptr<DaemonProcess> DaemonProcess::start(const DaemonSpec& spec, std::string* error) {
  ChildProcess::Options options;
  options.argv = {spec.executable, "--config",      spec.config_path,
                  "--output",      spec.output_dir, "--session",
                  spec.session,    "--workers",     std::to_string(spec.workers),
                  "--runtime-dir", spec.runtime_dir};
  options.stderr_path = spec.log_path;
  auto process = ChildProcess::start(options, error);
  if (!process) return nullptr;
  std::unique_ptr<DaemonProcess> daemon(new DaemonProcess());
  daemon->spec_ = spec;
  daemon->process_ = std::move(process);
  return daemon;
}

std::string DaemonProcess::socket_path() const { return session_socket_path(spec_.runtime_dir, spec_.session); }

Status DaemonProcess::wait_ready(Millis timeout) {
  std::string last_error = "no answer";
  const bool ready = wait_until(
      [&] {
        if (!process_->running()) return true;
        auto s = status(500);
        if (s) return true;
        last_error = s.message();
        return false;
      },
      timeout, Millis(20));
  if (!process_->running()) {
    return Status::error("tensorscoped exited during start-up (" + process_->exit_info()->describe() + "); log:\n" +
                         log());
  }
  if (!ready) return Status::error("tensorscoped did not answer on " + socket_path() + " in time: " + last_error);
  return Status::ok();
}

bool DaemonProcess::wait_status(const std::function<bool(const nlohmann::json&)>& predicate, Millis timeout,
                                nlohmann::json* last) const {
  return wait_until(
      [&] {
        auto s = status();
        if (!s) return false;
        if (last != nullptr) *last = *s;
        return predicate(*s);
      },
      timeout, Millis(20));
}

}  // namespace tensorscope::itest
