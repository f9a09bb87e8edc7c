#include "supervisor/supervisor.h"

#include "tensorscope/base/clock.h"
#include "tensorscope/base/process_stat.h"

#include "worker/device_payload_reader.h"
#include "supervisor/registration.h"
#include "supervisor/run_info_writer.h"
#include "supervisor/video_recovery.h"
#include "tensorscope/recording/video_steps.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "tensorscope/shared/control_protocol.h"
#include "tensorscope/shared/daemon_exit_status.h"
#include "tensorscope/shared/file_lock.h"
#include "tensorscope/base/logging.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/segment_cleanup.h"
#include "tensorscope/base/text_input.h"
#include "tensorscope/shared/wire_format.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/base/posix_path.h"

namespace tensorscope::daemon {
namespace {

int g_signal_pipe[2] = {-1, -1};
volatile sig_atomic_t g_stop_requested = 0;

void on_signal(int signo) {
  if (signo == SIGINT || signo == SIGTERM) g_stop_requested = 1;
  const int saved = errno;
  const char byte = static_cast<char>(signo);
  (void)!::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

Status install_signal_handlers() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::from_errno("pipe", errno);
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGINT, SIGTERM, SIGCHLD}) ::sigaction(s, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return Status::ok();
}

int64_t now_ms() { return steady_time_ms(); }

// Whether `pid` is stopped or traced (its state in /proc/<pid>/stat is T or t).
constexpr int kRegisterDeadlineMs = 5000;
constexpr int64_t kReplyDeadlineMs = 5000;      // a client reading its status reply slower than this loses it
constexpr size_t kMaxPendingConnections = 256;  // accepted, not yet registered or answered
constexpr size_t kMaxReplying = 64;             // replies still being written
constexpr int kRegisterReplyTimeoutMs = 250;    // a registering client reads its reply at once

}  // namespace

Supervisor::Supervisor(DaemonConfig config, std::unique_ptr<WorkerLauncher> launcher, StartMode mode)
    : config_(std::move(config)), launcher_(std::move(launcher)), mode_(mode) {}

Supervisor::~Supervisor() {
  stop_listening();
  if (session_lock_fd_ >= 0) ::close(session_lock_fd_);
  if (mode_.ready_fd >= 0) ::close(mode_.ready_fd);
}

void Supervisor::stop_listening() {
  if (listen_fd_ < 0) return;
  ::close(listen_fd_);
  listen_fd_ = -1;
  ::unlink(socket_path_.c_str());  // ours: the session lock kept every other daemon away
}

Status Supervisor::take_session_lock() {
  const std::string path = session_lock_path(runtime_dir_, config_.session);
  session_lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (session_lock_fd_ < 0) {
    return Status::from_errno("cannot open the session lock " + path, errno);
  }
  const int64_t deadline = now_ms() + config_.supervisor.shutdown_timeout.count() + 5000;
  bool told = false;
  for (;;) {
    const int err = try_lock_file(session_lock_fd_);
    if (err == 0) return Status::ok();
    if (!lock_held_elsewhere(err)) {
      return Status::from_errno("cannot take the session lock " + path, err);
    }
    // Held: a daemon that answers serves the session; one that does not is finishing.
    if (auto probe = connect_unix(socket_path_)) {
      ::close(*probe);
      already_running_ = true;
      return Status::error("a daemon for session '" + config_.session + "' is already running (socket " + socket_path_ +
                           ")");
    }
    if (g_stop_requested) return Status::error("stopped while waiting for the session lock");
    if (now_ms() > deadline) {
      return Status::error("the session lock " + path + " is held by a daemon that does not answer");
    }
    if (!told) TS_LOG_INFO("waiting for the previous daemon of session '{}' to finish", config_.session);
    told = true;
    ::usleep(50000);
  }
}

Status Supervisor::start() {
  // Two descriptors per producer (socket, segment): take what the hard limit allows.
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &limit);
  }
  runtime_dir_ = default_runtime_dir(config_.runtime_dir);
  Status dir = ensure_private_dir(runtime_dir_);
  if (!dir) return dir;
  socket_path_ = session_socket_path(runtime_dir_, config_.session);
  Status signals = install_signal_handlers();
  if (!signals) return signals;
  Status locked = take_session_lock();
  if (!locked) return locked;
  {
    // Probe CUDA once, now (once the session is ours: a daemon that is not needed exits
    // before starting a driver): the first registration must not wait for it.
    std::string why;
    if (device_payloads_supported(&why)) {
      TS_LOG_INFO("CUDA IPC payloads: supported");
    } else {
      TS_LOG_INFO(
          "CUDA IPC payloads: not supported ({}); clients send CUDA tensors through "
          "pinned host memory",
          why);
    }
  }
  const SegmentCleanup cleanup = remove_dead_segments(runtime_dir_);
  if (!cleanup.removed.empty()) {
    TS_LOG_INFO("removed {} segment(s) of dead producers from {} ({} bytes)", cleanup.removed.size(), runtime_dir_,
                cleanup.bytes);
  }
  session_dir_ = config_.output_dir + "/" + config_.session;
  anomalies_ = std::make_unique<AnomalyLog>(session_dir_);
  anomalies_->export_to_tensorboard(config_.export_, config_.session);
  anomalies_->read_back();  // a restart goes on from what the session had
  if (config_.output_private) {
    // Everything this process and its workers (which inherit the mask) make from now on is
    // the user's only; the session directory too, even when it was there before.
    ::umask(::umask(0) | 077);
  }
  std::error_code ec;
  std::filesystem::create_directories(session_dir_, ec);
  if (ec) return Status::error("cannot create output directory " + session_dir_ + ": " + ec.message());
  if (config_.output_private && ::chmod(session_dir_.c_str(), 0700) != 0) {
    return Status::from_errno("cannot make the output directory " + session_dir_ + " private", errno);
  }
  index_ = std::make_unique<IndexWriter>(session_dir_);
  Status loaded = index_->load();
  if (!loaded) return loaded;
  // A daemon killed before: its workers' open videos, and finished videos it had not
  // listed yet (the session lock is ours, so no other daemon writes here).
  recover_videos(".tmp-", "an earlier daemon");
  {
    std::set<std::string> listed;
    for (const IndexEntry& e : index_->entries()) listed.insert(e.path);
    for (const IndexEntry& e : unlisted_videos(session_dir_, listed)) {
      TS_LOG_WARN("listed {} again ({} frames) from its journal", e.path, e.frames);
      if (Status st = index_->stage(e); !st) TS_LOG_ERROR("cannot add {} to index.json: {}", e.path, st.message());
    }
  }
  Status written = index_->write();  // index.json exists from the start, even when empty
  if (!written) return written;
  workers_.resize(static_cast<size_t>(config_.workers));
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].index = static_cast<int>(i);
    workers_[i].policy = WorkerRestartPolicy(RestartPolicyConfig{
        config_.supervisor.restart_backoff_initial.count(), config_.supervisor.restart_backoff_max.count(),
        config_.supervisor.heartbeat_timeout.count(), /*healthy_after_ms=*/10000,
        /*starved_limit_ms=*/std::max<int64_t>(60000, 12 * config_.supervisor.heartbeat_timeout.count())});
    spawn_worker(workers_[i]);
  }
  // Published last: a client that sees the socket is served at once.
  auto fd = listen_unix(socket_path_);
  if (!fd) return fd.status();
  listen_fd_ = *fd;
  started_ms_ = now_ms();
  last_producer_ms_ = started_ms_;
  if (mode_.ready_fd >= 0) {
    const char ready = 'R';
    (void)!::write(mode_.ready_fd, &ready, 1);
    ::close(mode_.ready_fd);
    mode_.ready_fd = -1;
  }
  TS_LOG_INFO("tensorscoped: session '{}', {} workers, socket {}, output {}", config_.session, config_.workers,
              socket_path_, session_dir_);
  if (mode_.on_started) live_url_ = mode_.on_started();
  if (anomalies_ && !live_url_.empty()) anomalies_->link_to_live_page(live_url_);
  return Status::ok();
}

void Supervisor::spawn_worker(WorkerSlot& worker) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    TS_LOG_ERROR("socketpair for worker {}: {}", worker.index, errno_text(errno));
    worker.policy.start_failed(now_ms());
    return;
  }
  const StatusOr<pid_t> launched = launcher_->launch(worker.index, fds[1]);
  ::close(fds[1]);
  if (!launched) {
    TS_LOG_ERROR("cannot start worker {}: {}", worker.index, launched.message());
    ::close(fds[0]);
    worker.policy.start_failed(now_ms());
    return;
  }
  const pid_t pid = *launched;
  worker.pid = pid;
  worker.channel = MessageChannel(fds[0]);
  worker.alive = true;
  worker.policy.started(now_ms());
  worker.stats = nlohmann::json::object();
  Status sent = worker.channel.send({{control::kType, control::kConfig},
                                     {"config", to_json(config_)},
                                     {"worker_index", worker.index},
                                     {"session_dir", session_dir_}});
  if (!sent) TS_LOG_ERROR("cannot configure worker {}: {}", worker.index, sent.message());
  for (auto& [id, producer] : producers_) {
    if (producer.worker == worker.index) attach(producer);
  }
  TS_LOG_INFO("worker {} started (pid {})", worker.index, pid);
}

void Supervisor::recover_videos(const std::string& prefix, const std::string& whose) {
  RecoveredVideos found = recover_temp_videos(session_dir_, prefix);
  for (const IndexEntry& e : found.entries) {
    TS_LOG_WARN("recovered {} ({} frames, steps {}..{}) from {}", e.path, e.frames, e.first_step, e.last_step, whose);
    if (Status st = index_->stage(e); !st) TS_LOG_ERROR("cannot add {} to index.json: {}", e.path, st.message());
    index_dirty_ = true;
  }
  for (const std::string& why : found.failures) TS_LOG_WARN("deleted an unfinished video of {}: {}", whose, why);
}

void Supervisor::on_worker_exit(WorkerSlot& worker, const std::string& why) {
  if (!worker.alive) return;
  worker.alive = false;
  // Read what the worker said before it died (finished files above all).
  (void)worker.channel.read_available();
  nlohmann::json message;
  while (worker.channel.pop(&message)) handle_worker_message(worker, message);
  worker.channel.close();
  // Its open videos play up to their last whole frame: finished and listed as they are.
  recover_videos(".tmp-" + std::to_string(worker.pid) + "-",
                 "worker " + std::to_string(worker.index) + " (pid " + std::to_string(worker.pid) + ")");
  // What it had taken from the rings but not drawn yet is gone with it: counted where the
  // producers see it (stats().dropped_by_daemon), and said.
  uint64_t lost = 0;
  for (auto& [id, producer] : producers_) {
    if (producer.worker != worker.index || !producer.segment) continue;
    wire::SegmentHeader* h = producer.segment->header();
    const uint64_t n = h->in_render.exchange(0, std::memory_order_relaxed);
    h->dropped_by_daemon.fetch_add(n, std::memory_order_relaxed);
    lost += n;
  }
  if (lost > 0) {
    TS_LOG_WARN(
        "worker {} (pid {}) had {} record(s) taken but not drawn: lost (counted in the producers' "
        "dropped_by_daemon)",
        worker.index, worker.pid, lost);
  }
  const int64_t delay = worker.policy.exited(now_ms(), /*counted=*/!g_stop_requested);
  if (g_stop_requested) {
    TS_LOG_INFO("worker {} (pid {}) {}", worker.index, worker.pid, why);
  } else {
    TS_LOG_WARN("worker {} (pid {}) {}; restarting in {} ms", worker.index, worker.pid, why, delay);
  }
  worker.pid = -1;
}

void Supervisor::reap_children() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (auto& worker : workers_) {
      if (worker.pid != pid) continue;
      std::string why = WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                            : "exited with status " + std::to_string(WEXITSTATUS(status));
      on_worker_exit(worker, why);
    }
  }
}

void Supervisor::check_workers(int64_t now) {
  for (auto& worker : workers_) {
    if (worker.alive && worker.policy.heartbeat_missed(now)) {
      const std::optional<ProcessStat> stat = read_process_stat(worker.pid);
      if (stat && stat->stopped()) {
        // Stopped on purpose (a debugger, SIGSTOP): not hung. It goes on when continued.
        if (!worker.stopped_logged) {
          TS_LOG_WARN("worker {} (pid {}) is stopped (a debugger or SIGSTOP?); not restarting it", worker.index,
                      worker.pid);
        }
        worker.stopped_logged = true;
        continue;
      }
      worker.stopped_logged = false;
      const Silence silence = stat ? worker.policy.silence(now, stat->runnable(), stat->cpu_ticks) : Silence::kHung;
      if (silence == Silence::kStarved) {
        // Waiting for a core or the disk, or still working: a busy machine, not a hang.
        if (!worker.starved) {
          ++worker.starved_episodes;
          TS_LOG_WARN(
              "worker {} (pid {}) has not been heard from for {} ms but is {}: the machine is busy; "
              "waiting for it",
              worker.index, worker.pid, worker.policy.silent_ms(now),
              stat->runnable() ? "runnable" : "still using CPU time");
        }
        worker.starved = true;
        continue;
      }
      if (silence == Silence::kHung) {
        TS_LOG_WARN("worker {} (pid {}) missed its heartbeat for {} ms {}; killing it", worker.index, worker.pid,
                    worker.policy.silent_ms(now),
                    worker.starved ? "and stayed silent past the starved limit" : "while idle (hung)");
        ::kill(worker.pid, SIGKILL);  // reaped (and restarted) through SIGCHLD
        worker.policy.heard(now);
        worker.starved = false;
      }
    }
    if (!worker.alive && worker.policy.restart_due(now) && !g_stop_requested) spawn_worker(worker);
  }
}

int Supervisor::pick_worker() const {
  std::vector<int> load(workers_.size(), 0);
  for (const auto& [id, p] : producers_) {
    if (p.worker >= 0) ++load[static_cast<size_t>(p.worker)];
  }
  int best = 0;
  for (size_t i = 1; i < workers_.size(); ++i) {
    if (load[i] < load[static_cast<size_t>(best)]) best = static_cast<int>(i);
  }
  return best;
}

void Supervisor::attach(Producer& producer) {
  WorkerSlot& worker = workers_[static_cast<size_t>(producer.worker)];
  if (!worker.alive) return;  // attached again when the worker restarts
  Status sent = worker.channel.send({{control::kType, control::kAttach},
                                     {control::kProducerId, producer.id},
                                     {"rank", producer.rank},
                                     {"reference", producer.reference}},
                                    producer.segment_fd);
  if (sent && producer.detaching) {
    sent = worker.channel.send({{control::kType, control::kDetach}, {control::kProducerId, producer.id}});
  }
  if (!sent) {
    TS_LOG_ERROR("cannot hand producer {} to worker {}: {}", producer.id, worker.index, sent.message());
    abandon_worker(worker);
  }
}

void Supervisor::abandon_worker(WorkerSlot& worker) {
  // A channel that failed mid-frame cannot be trusted again: restart the worker, which
  // gets every producer it had re-attached.
  if (worker.alive && worker.pid > 0) ::kill(worker.pid, SIGKILL);
}

void Supervisor::accept_connections() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop looking at the listen socket for a while instead of
        // spinning on it; producers retry.
        if (accept_paused_until_ms_ == 0) TS_LOG_ERROR("cannot accept: {}", errno_text(errno));
        accept_paused_until_ms_ = now_ms() + 200;
      }
      return;
    }
    accept_paused_until_ms_ = 0;
    auto cred = peer_credentials(fd);
    if (!cred || cred->uid != ::geteuid()) {
      ++registrations_refused_;
      TS_LOG_WARN("refused a connection from uid {}", cred ? static_cast<long>(cred->uid) : -1L);
      ::close(fd);
      continue;
    }
    if (pending_.size() >= kMaxPendingConnections) {
      ::close(fd);  // a flood of connections: clients retry
      continue;
    }
    pending_.push_back(Pending{MessageChannel(fd), now_ms()});
  }
}

void Supervisor::reply_and_close(MessageChannel& connection, const nlohmann::json& message) {
  const Status posted = connection.post(message);
  if (!posted || connection.unsent() == 0 || replying_.size() >= kMaxReplying) {
    connection.close();
    return;
  }
  replying_.push_back(Replying{std::move(connection), now_ms() + kReplyDeadlineMs});
}

void Supervisor::flush_replies(const std::vector<pollfd>& fds, size_t first, size_t count, int64_t now) {
  for (size_t k = 0; k < count && k < replying_.size(); ++k) {
    Replying& r = replying_[k];
    if (first + k < fds.size() && fds[first + k].revents != 0 && !r.connection.flush()) r.connection.close();
    if (r.connection.unsent() == 0 || now > r.deadline_ms) r.connection.close();
  }
  replying_.erase(
      std::remove_if(replying_.begin(), replying_.end(), [](const Replying& r) { return !r.connection.is_open(); }),
      replying_.end());
}

void Supervisor::notice_own_stall(int64_t now) {
  // The workers were not heard because we did not listen: give them a fresh deadline.
  if (const int64_t gap = own_stall_.gap(now); gap > 0) {
    TS_LOG_WARN("the supervisor did not run for {} ms; the workers' heartbeat deadlines start again", gap);
    for (auto& w : workers_) {
      if (w.alive) w.policy.heard(now);
    }
  }
}

void Supervisor::handle_register(MessageChannel& connection, const nlohmann::json& m) {
  auto refuse = [&](const std::string& why) {
    ++registrations_refused_;
    TS_LOG_WARN("refused a registration: {}", why);
    reply_and_close(connection, control::error_message(why));
  };
  auto cred = peer_credentials(connection.fd());
  if (!cred) return refuse(cred.message());
  StatusOr<AcceptedRegistration> accepted = check_registration(m, *cred, config_.session, runtime_dir_);
  if (!accepted) return refuse(accepted.message());

  Producer producer;
  producer.id = next_producer_id_++;
  producer.pid = cred->pid;
  producer.rank = accepted->segment->header()->rank;
  producer.segment_path = accepted->segment_path;
  producer.segment_fd = accepted->segment_fd;
  producer.segment = std::move(accepted->segment);
  producer.worker = pick_worker();
  producer.registered_ms = now_ms();
  std::string cuda_note;
  const bool cuda_ipc = device_payloads_supported(&cuda_note);
  const ReferenceChoice reference =
      choose_reference(m.contains("reference") && m["reference"].is_string() ? m["reference"].get<std::string>() : "",
                       config_.reference.session, config_.output_dir, session_dir_);
  if (!reference.note.empty()) TS_LOG_WARN("producer {} (pid {}): {}", producer.id, producer.pid, reference.note);
  producer.reference = reference.dir;
  Status replied =
      connection.send(registered_reply(producer.id, cuda_ipc, cuda_note, reference), -1, kRegisterReplyTimeoutMs);
  if (!replied) {
    ::close(producer.segment_fd);
    return refuse(replied.message());
  }
  producer.connection = std::move(connection);
  auto& stored = producers_[producer.id] = std::move(producer);
  TS_LOG_INFO("producer {} registered: pid {}, rank {}, worker {}", stored.id, stored.pid, stored.rank, stored.worker);
  // run_info/rank<r>_pid<pid>.json (+ .patch), by a helper process; never fails here.
  (void)record_run_info(session_dir_, m.value("run_info", nlohmann::json()),
                        RunInfoProducer{stored.id, static_cast<long>(stored.pid), stored.rank, config_.session});
  attach(stored);
}

void Supervisor::handle_pending(Pending& pending, bool* done) {
  Status st = pending.connection.read_available();
  nlohmann::json m;
  if (pending.connection.pop(&m)) {
    *done = true;
    try {
      const std::string type = control::message_type(m);
      if (type == control::kRegister) {
        handle_register(pending.connection, m);
      } else if (type == control::kStatus) {
        reply_and_close(pending.connection, status_json());
      } else {
        reply_and_close(pending.connection, control::error_message("unknown request"));
      }
    } catch (const std::exception& e) {
      ++registrations_refused_;
      TS_LOG_WARN("refused a malformed request: {}", e.what());
      reply_and_close(pending.connection, control::error_message(std::string("malformed request: ") + e.what()));
    }
    return;
  }
  if (!st || now_ms() - pending.accepted_ms > kRegisterDeadlineMs) {
    pending.connection.close();
    *done = true;
  }
}

void Supervisor::producer_gone(Producer& producer) {
  if (producer.detaching) return;
  producer.detaching = true;
  producer.connection.close();
  TS_LOG_INFO("producer {} (pid {}) disconnected; draining its ring", producer.id, producer.pid);
  WorkerSlot& worker = workers_[static_cast<size_t>(producer.worker)];
  if (worker.alive) {
    Status sent = worker.channel.send({{control::kType, control::kDetach}, {control::kProducerId, producer.id}});
    if (!sent) abandon_worker(worker);
  }
}

void Supervisor::forget_producer(uint64_t id) {
  auto it = producers_.find(id);
  if (it == producers_.end()) return;
  if (it->second.segment_fd >= 0) ::close(it->second.segment_fd);
  ::unlink(it->second.segment_path.c_str());  // the client removes it too; whoever is last
  producers_.erase(it);
}

void Supervisor::handle_worker_message(WorkerSlot& worker, const nlohmann::json& m) {
  try {
    dispatch_worker_message(worker, m);
  } catch (const std::exception& e) {
    TS_LOG_WARN("worker {} sent a malformed message: {}", worker.index, e.what());
  }
}

void Supervisor::dispatch_worker_message(WorkerSlot& worker, const nlohmann::json& m) {
  const std::string type = control::message_type(m);
  if (worker.starved) {
    TS_LOG_INFO("worker {} (pid {}) heard from again after {} ms", worker.index, worker.pid,
                worker.policy.silent_ms(now_ms()));
    worker.starved = false;
  }
  if (type == control::kHeartbeat) {
    worker.policy.heard(now_ms());
    if (m.contains("stats") && m["stats"].is_object()) worker.stats = m["stats"];
  } else if (type == control::kFile) {
    auto entry = index_entry_from_json(m.value("entry", nlohmann::json::object()));
    if (!entry) {
      TS_LOG_WARN("worker {} sent a bad file entry: {}", worker.index, entry.message());
      return;
    }
    Status st = index_->stage(*entry);
    if (!st) TS_LOG_ERROR("cannot add {} to index.json: {}", entry->path, st.message());
    index_dirty_ = true;
  } else if (type == control::kAnomaly) {
    if (anomalies_) anomalies_->add(m.value("anomaly", nlohmann::json()));
  } else if (type == control::kAttachFailed) {
    // The worker could not map the segment: drop the producer; its client notices the
    // closed socket and registers a fresh segment.
    const uint64_t id = m.value(control::kProducerId, uint64_t{0});
    TS_LOG_ERROR("worker {} could not attach producer {}: {}", worker.index, id,
                 m.value(control::kMessage, std::string()));
    forget_producer(id);
  } else if (type == control::kDetached) {
    const uint64_t id = m.value(control::kProducerId, uint64_t{0});
    auto it = producers_.find(id);
    if (it != producers_.end() && it->second.detaching) {
      flush_index(/*now=*/true);  // its last files, finalized before "detached", are listed first
      forget_producer(id);
    }
  } else if (type == control::kBye) {
    worker.policy.heard(now_ms());
  }
}

nlohmann::json Supervisor::status_json() const {
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& w : workers_) {
    workers.push_back({{"index", w.index},
                       {"pid", w.pid},
                       {"alive", w.alive},
                       {"restarts", w.policy.restarts()},
                       {"starved", w.starved},
                       {"starved_episodes", w.starved_episodes},
                       {"stats", w.stats}});
  }
  nlohmann::json producers = nlohmann::json::array();
  for (const auto& [id, p] : producers_) {
    const wire::SegmentHeader* h = p.segment->header();
    producers.push_back({{"id", id},
                         {"pid", p.pid},
                         {"rank", p.rank},
                         {"worker", p.worker},
                         {"connected", !p.detaching},
                         {"pushed", h->pushed.load(std::memory_order_relaxed)},
                         {"dropped_full", h->dropped_full.load(std::memory_order_relaxed)},
                         {"paced", h->paced.load(std::memory_order_relaxed)},
                         {"pace_stride", std::max(1.0, h->pace_stride16.load(std::memory_order_relaxed) / 16.0)},
                         {"refused", h->refused.load(std::memory_order_relaxed)},
                         {"bytes_pushed", h->bytes_pushed.load(std::memory_order_relaxed)},
                         {"received", h->received.load(std::memory_order_relaxed)},
                         {"dropped_invalid", h->dropped_invalid.load(std::memory_order_relaxed)},
                         {"bytes_received", h->bytes_received.load(std::memory_order_relaxed)},
                         {"dropped_by_daemon", h->dropped_by_daemon.load(std::memory_order_relaxed)},
                         {"in_render", h->in_render.load(std::memory_order_relaxed)}});
  }
  return {{control::kType, control::kStatus},
          {"session", config_.session},
          {"pid", ::getpid()},
          {"autostarted", mode_.autostarted},
          {"idle_exit_ms", config_.supervisor.idle_exit.count()},
          {"uptime_ms", now_ms() - started_ms_},
          {"output_dir", absolute_path(session_dir_)},  // (a client or viewer elsewhere finds it)
          {"live_url", live_url_.empty() ? nlohmann::json(nullptr) : nlohmann::json(live_url_)},
          {"registrations_refused", registrations_refused_},
          {"anomalies", anomalies_ ? anomalies_->status() : nlohmann::json(nullptr)},
          {"workers", workers},
          {"producers", producers},
          {"files", index_ ? index_->entries().size() : 0},
          {"output", output_status()}};
}

void Supervisor::flush_index(bool now) {
  if (!index_dirty_) return;
  // Many files finishing together (a producer with hundreds of streams leaving) cost one
  // rewrite per interval, not one per file.
  constexpr int64_t kIndexWriteIntervalMs = 500;
  const int64_t ms = now_ms();
  if (!now && ms - index_written_ms_ < kIndexWriteIntervalMs) return;
  if (!now && !index_health_.may_try(ms)) return;  // a full disk: tried every second, logged now and then
  index_written_ms_ = ms;
  Status written = index_->write();
  if (!written) {
    index_health_.failed(index_->last_errno() != 0 ? index_->last_errno() : EIO,
                         "cannot write index.json: " + written.message(), ms);
    return;  // stays dirty: tried again
  }
  index_health_.succeeded(ms);
  index_dirty_ = false;
}

void Supervisor::keep_session_dir() {
  const int64_t ms = now_ms();
  if (ms - session_dir_checked_ms_ < OutputHealth::kRetryIntervalMs) return;
  session_dir_checked_ms_ = ms;
  struct stat st {};
  if (::stat(session_dir_.c_str(), &st) == 0 || errno != ENOENT) return;
  std::error_code ec;
  std::filesystem::create_directories(session_dir_, ec);
  if (ec) {
    index_health_.failed(
        ec.value(), "the output directory " + session_dir_ + " is gone and cannot be made again: " + ec.message(), ms);
    return;
  }
  const size_t gone = index_->forget_missing_files();
  TS_LOG_WARN("the output directory {} was deleted; made it again ({} listed files went with it)", session_dir_, gone);
  index_dirty_ = true;
}

void Supervisor::keep_within_budget() {
  const int64_t ms = now_ms();
  if (ms < next_budget_check_ms_) return;
  usage_ = measure_session(session_dir_);
  // A session of very many files (a .npy dump per step) is measured less often: the walk
  // takes at most a hundredth of the supervisor's time.
  next_budget_check_ms_ = now_ms() + std::max<int64_t>(kBudgetIntervalMs, 100 * (now_ms() - ms));
  const uint64_t budget = static_cast<uint64_t>(config_.output_budget_mb) << 20;
  if (budget == 0 || usage_.total <= budget) {
    over_budget_logged_ = false;
    return;
  }
  std::vector<BudgetVideo> videos;
  for (const IndexEntry& e : index_->entries()) {
    if (e.path.size() < 4 || e.path.compare(e.path.size() - 4, 4, ".mp4") != 0) continue;  // PNGs stay
    uint64_t bytes = 0;
    for (const std::string& path : {session_dir_ + "/" + e.path, recording::kept_steps_path(session_dir_, e.path)}) {
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    }
    videos.push_back({e, bytes});
  }
  std::vector<AnomalyMark> marks;
  if (anomalies_) {
    for (const nlohmann::json& a : anomalies_->kept()) {
      marks.push_back({a.value("rank", 0), a.value("pid", int64_t{0}), a.value("step", int64_t{0})});
    }
  }
  const BudgetPlan plan = plan_output_budget(std::move(videos), usage_.total, budget, marks, kEvidenceSteps);
  for (const std::string& path : plan.remove) {
    ::unlink((session_dir_ + "/" + path).c_str());
    ::unlink(recording::kept_steps_path(session_dir_, path).c_str());
    index_->remove(path);
  }
  if (!plan.remove.empty()) {
    index_dirty_ = true;
    rotated_files_ += plan.remove.size();
    rotated_bytes_ += plan.freed;
    TS_LOG_INFO(
        "output_budget_mb {}: the session held {} MB; its {} oldest videos deleted ({} MB; kept: each "
        "stream's newest and the videos around anomalies)",
        config_.output_budget_mb, usage_.total >> 20, plan.remove.size(), plan.freed >> 20);
    usage_.total -= std::min(usage_.total, plan.freed);
    usage_.videos -= std::min(usage_.videos, plan.freed);
  }
  if (plan.still_over && !over_budget_logged_) {
    over_budget_logged_ = true;
    TS_LOG_WARN(
        "output_budget_mb {}: the session holds {} MB and nothing more may go (videos {} MB: each stream's newest "
        "and the anomalies' evidence; summary tables {} MB; recordings {} MB; other {} MB)",
        config_.output_budget_mb, usage_.total >> 20, usage_.videos >> 20, usage_.summaries >> 20,
        usage_.recordings >> 20, usage_.other >> 20);
  }
}

nlohmann::json Supervisor::output_status() const {
  nlohmann::json out = {{"state", "ok"}, {"not_written", 0}, {"index", index_health_.summary()}};
  out["disk"] = {{"bytes", usage_.total},           {"budget", static_cast<uint64_t>(config_.output_budget_mb) << 20},
                 {"videos", usage_.videos},         {"summaries", usage_.summaries},
                 {"recordings", usage_.recordings}, {"other", usage_.other},
                 {"rotated_files", rotated_files_}, {"rotated_bytes", rotated_bytes_}};
  auto consider = [&](const nlohmann::json& h, bool frames) {
    if (!h.is_object()) return;
    if (frames) out["not_written"] = out["not_written"].get<uint64_t>() + h.value("not_written", uint64_t{0});
    const std::string state = h.value("state", std::string("ok"));
    if (state != "ok" && out["state"] == "ok") {
      out["state"] = state;
      out["error"] = h.value("error", std::string());
    }
  };
  consider(index_health_.summary(), false);
  for (const auto& w : workers_) consider(w.stats.value("output", nlohmann::json()), true);
  return out;
}

void Supervisor::shutdown_workers() {
  TS_LOG_INFO("shutting down: workers finalize their videos");
  for (auto& w : workers_) {
    if (w.alive) (void)w.channel.send({{control::kType, control::kShutdown}});
  }
  const int64_t deadline = now_ms() + config_.supervisor.shutdown_timeout.count();
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<WorkerSlot*> owners;
    for (auto& w : workers_) {
      if (w.alive && w.channel.is_open()) {
        fds.push_back({w.channel.fd(), POLLIN, 0});
        owners.push_back(&w);
      }
    }
    reap_children();
    bool any_alive = std::any_of(workers_.begin(), workers_.end(), [](const WorkerSlot& w) { return w.alive; });
    if (!any_alive) break;
    const int64_t left = deadline - now_ms();
    if (left <= 0) {
      for (auto& w : workers_) {
        if (w.alive) {
          TS_LOG_ERROR("worker {} did not finish in time; killing it", w.index);
          ::kill(w.pid, SIGKILL);
        }
      }
      // Reaped, so that its open videos are recovered and listed (on_worker_exit): a loaded
      // machine can take more than a moment to end a killed process.
      const int64_t reap_deadline = now_ms() + 10000;
      do {
        ::usleep(20000);
        reap_children();
      } while (now_ms() < reap_deadline &&
               std::any_of(workers_.begin(), workers_.end(), [](const WorkerSlot& w) { return w.alive; }));
      break;
    }
    ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left, 100)));
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Status st = owners[i]->channel.read_available();
      nlohmann::json m;
      while (owners[i]->channel.pop(&m)) handle_worker_message(*owners[i], m);
      if (!st) owners[i]->channel.close();  // EOF: the worker is exiting; reaped above
    }
    flush_index();
  }
}

int Supervisor::run() {
  Status started = start();
  if (!started) {
    TS_LOG_ERROR("tensorscoped cannot start: {}", started.message());
    if (std::any_of(workers_.begin(), workers_.end(), [](const WorkerSlot& w) { return w.alive; })) {
      shutdown_workers();  // it failed after they were started
    }
    return already_running_ ? kDaemonExitAlreadyRunning : kDaemonExitStartFailed;
  }
  while (!g_stop_requested) {
    std::vector<pollfd> fds;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    const bool accepting = now_ms() >= accept_paused_until_ms_;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (auto& w : workers_) {
      if (w.alive && w.channel.is_open()) fds.push_back({w.channel.fd(), POLLIN, 0});
    }
    for (auto& p : pending_) fds.push_back({p.connection.fd(), POLLIN, 0});
    for (auto& [id, p] : producers_) {
      if (!p.detaching) fds.push_back({p.connection.fd(), POLLIN, 0});
    }
    const size_t replies_at = fds.size(), replies = replying_.size();
    for (auto& r : replying_) fds.push_back({r.connection.fd(), POLLOUT, 0});
    ::poll(fds.data(), fds.size(), 100);

    char drain[64];
    while (::read(g_signal_pipe[0], drain, sizeof(drain)) > 0) {}
    reap_children();
    if (g_stop_requested) break;
    const int64_t now = now_ms();
    notice_own_stall(now);
    flush_replies(fds, replies_at, replies, now);

    size_t i = 2;
    for (auto& w : workers_) {
      if (!(w.alive && w.channel.is_open())) continue;
      const short revents = fds[i++].revents;
      if (revents == 0) continue;
      Status st = w.channel.read_available();
      nlohmann::json m;
      while (w.channel.pop(&m)) handle_worker_message(w, m);
      if (!st) w.channel.close();  // exit is noticed by waitpid
    }
    for (size_t k = 0; k < pending_.size(); ++k) {
      const short revents = fds[i++].revents;
      bool done = false;
      if (revents != 0 || now - pending_[k].accepted_ms > kRegisterDeadlineMs) {
        handle_pending(pending_[k], &done);
      }
      if (done) pending_[k].connection.close();
    }
    pending_.erase(
        std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return !p.connection.is_open(); }),
        pending_.end());
    for (auto& [id, p] : producers_) {
      if (p.detaching) continue;
      if (i < fds.size() && fds[i++].revents != 0) {
        Status st = p.connection.read_available();
        nlohmann::json m;
        while (p.connection.pop(&m)) {}
        if (!st) producer_gone(p);
      }
    }
    if (fds[1].revents != 0) accept_connections();
    check_workers(now);
    keep_session_dir();
    keep_within_budget();
    flush_index();
    if (!producers_.empty() || !pending_.empty()) last_producer_ms_ = now;
    const int64_t idle_exit_ms = config_.supervisor.idle_exit.count();
    if (idle_exit_ms > 0 && now - last_producer_ms_ >= idle_exit_ms) {
      TS_LOG_INFO("no producer for {} ms (supervisor.idle_exit_ms): exiting", now - last_producer_ms_);
      g_stop_requested = 1;  // from here on exactly as on SIGTERM
      break;
    }
  }
  // New clients find no socket (and may start a new daemon, which waits for our lock)
  // rather than registering with a daemon that is finishing.
  stop_listening();
  shutdown_workers();
  for (auto& [id, p] : producers_) {
    if (p.segment_fd >= 0) ::close(p.segment_fd);
    if (p.detaching) ::unlink(p.segment_path.c_str());
  }
  index_dirty_ = true;
  flush_index(/*now=*/true);  // a last try, even while the output is down
  if (index_dirty_) {
    TS_LOG_ERROR(
        "tensorscoped: stopped; index.json could not be written: it lists fewer than the {} files "
        "finished (a daemon started on this session lists them from their journals)",
        index_->entries().size());
  } else {
    TS_LOG_INFO("tensorscoped: stopped; {} files listed in {}/index.json", index_->entries().size(), session_dir_);
  }
  return 0;
}

}  // namespace tensorscope::daemon
